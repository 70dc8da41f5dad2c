"""Revealed belief vs stated answer (Mondal et al., "Do Large Language Models Exhibit
Cognitive Dissonance?"): dice, coins, preference, choice and a diagnosis case study.

Every environment here is a finite grid of scenarios. Each grid point is one
:class:`~belieflens.episodes.base.Episode` with a single turn (index 0) and two
probes that read the same belief in two ways:

- ``revealed`` (kind ``completion``): the prompt ends right before the outcome and
  the belief is the model's distribution over the outcome continuations; its
  oracle is the exact outcome distribution (:mod:`.exact`).
- ``stated`` (kind ``mcq``): the same scenario as a question with five candidate
  probabilities labelled ``[[A]]`` ... ``[[E]]``, asked under the five cyclic
  rotations; see :mod:`.stated` for why its oracle is ``None`` and where the
  correct candidate is recorded.
"""
