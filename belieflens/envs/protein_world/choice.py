"""How the model chooses ProteinWorld's next experiment.

From Prompts to Posteriors (§4.2, App. F.3.4): "We use the LLM to update beliefs and choose
experiments"; experiments are chosen by expected information gain, maximised over the whole,
finite set Ξ, "by using the reduction in entropy over hypotheses". The LLM's agent therefore
chooses by EIG *under its own belief*, p_LLM, which the paper reads as the verbalised
posterior (App. F.3.2):

- ``sequence=model`` (:func:`eig_choice` on :func:`stated_belief`): the model's **stated
  posterior** after the results so far (:mod:`.stated`, the read-out the episode records for
  that turn) is the prior of the EIG; the likelihoods are the world's (:func:`~.oracle.eig`
  on its measurement grids). The experiment of largest EIG is run (the lowest index among
  ties within 1e-12). A stated reply that did not parse, retries spent, falls back to the
  seeded draw, recorded.
- ``sequence=model-revealed``: the same under the model's **revealed belief** — the
  ``class`` MCQ of the single-turn context, scored under every rotation of its Latin square
  by the bound model and debiased (geometric pooling,
  :func:`belieflens.episodes.latin.debias`); a belief that is not a distribution (a scorer
  that returned no finite log-probs) falls back to the seeded draw, recorded.
- ``sequence=model-mcq`` (:func:`mcq_choice`): the model is asked the ``next-experiment`` MCQ
  and answers greedily, once under every rotation (so no position is favoured); each reply
  is parsed strictly (:func:`parse_letter`: ``B``, ``B.``, ``(B)``, ``Answer: B``, ``B reveal
  ...`` when the option's own text follows; ``A protein ...`` is not ``A``), and the
  experiment named by most rotations is run (ties drawn, seeded). When no rotation parses,
  the seeded draw stands in, recorded as a fallback; parse failures and fallbacks are in the
  episode's truth and in the report, never silently replaced.

Each choice records in the episode's truth ``choice_source_k`` (``eig-stated``,
``eig-revealed``, ``mcq`` or ``fallback``; files written before the stated choice say ``eig``
for the revealed one) and, for the EIG choices, the belief used (``choice_belief_k_c``) and
the EIG of every experiment under it (``choice_eig_k_j``, nats); for ``mcq``, how many
rotations parsed (``choice_parsed_k`` of ``choice_rotations_k``) and the votes
(``choice_votes_k``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from belieflens.envs.protein_world.oracle import ExperimentGrid, eig
from belieflens.episodes.base import Message, Probe
from belieflens.episodes.generation import OptionScorer, TextGenerator, derive_seed
from belieflens.episodes.latin import debias
from belieflens.episodes.questions import LETTERS, mcq_text

MCQ_TOKENS = 8
"""New tokens of a greedy MCQ answer (enough for ``Answer: B. reveal``)."""


@dataclass(frozen=True)
class Choice:
    """One experiment choice and what the episode's truth records about it."""

    experiment: int
    source: str
    """``eig-stated``, ``eig-revealed``, ``mcq`` or ``fallback``."""
    truth: dict[str, float | str] = field(default_factory=dict)


def revealed_belief(scorer: OptionScorer, probe: Probe) -> np.ndarray:
    """The model's debiased belief over ``probe``'s outcomes: its queries (one per rotation)
    scored by ``scorer`` and pooled geometrically."""
    scores = scorer.score(probe.queries)
    logprob = np.asarray([list(s) for s in scores], dtype=np.float64)
    outcome = np.asarray([q.outcome for q in probe.queries], dtype=np.int64)
    return np.asarray(debias(logprob, outcome, method="geometric"))


def stated_belief(truth: Mapping[str, float | str], classes: int, turn: int) -> np.ndarray:
    """The stated posterior of turn ``turn`` from its truth entries (``stated_<turn>_<c>``;
    NaN where the reply did not parse, so that the choice falls back)."""
    return np.asarray([float(truth[f"stated_{turn}_{c}"]) for c in range(classes)])


def eig_choice(belief: np.ndarray, grids: Sequence[ExperimentGrid], fallback: int,
               step: int, *, source: str = "eig-revealed") -> Choice:
    """The experiment of largest EIG under ``belief`` with the world's likelihoods (module
    docstring), recorded as chosen by ``source`` (``eig-stated``, ``eig-revealed``);
    ``fallback`` when ``belief`` is not a distribution (an unparsed stated reply, a scorer
    with no finite log-probs)."""
    if belief.size == 0 or not np.all(np.isfinite(belief)) or belief.sum() <= 0:
        return Choice(fallback, "fallback", {f"choice_source_{step}": "fallback"})
    gains = np.array([eig(belief, g) for g in grids])
    best = int(np.flatnonzero(gains >= gains.max() - 1e-12)[0])
    truth: dict[str, float | str] = {f"choice_source_{step}": source}
    truth |= {f"choice_belief_{step}_{c}": float(p) for c, p in enumerate(belief)}
    truth |= {f"choice_eig_{step}_{j}": float(g) for j, g in enumerate(gains)}
    return Choice(best, source, truth)


def parse_letter(reply: str, shown: Sequence[str]) -> int | None:
    """The position a reply to an MCQ over ``shown`` names, or ``None`` (module docstring).

    Examples:
        >>> shown = ("reveal the exact value of Fold", "reveal the exact value of Helix")
        >>> [parse_letter(r, shown) for r in ("B", "(A).", "Answer: B", "B reveal the exact")]
        [1, 0, 1, 1]
        >>> parse_letter("A protein with high Fold", shown) is None
        True
    """
    letters = LETTERS[: len(shown)]
    text = reply.strip()
    m = re.match(rf"^(?:(?:the\s+)?answer(?:\s+is)?\s*:?\s*)?\(?([{letters}])\)?(.*)$", text,
                 re.IGNORECASE | re.DOTALL)
    if m is None or (m.group(1).islower() and not text.lower().startswith("answer")):
        return None
    j = letters.index(m.group(1).upper())
    rest = m.group(2)
    if not rest.strip() or re.match(r"^\s*[.):,;\n]", rest):
        return j
    if rest.strip().lower().startswith(shown[j].lower()[: max(8, len(shown[j]) // 2)]):
        return j  # the letter, then the option's own words
    return None


def mcq_choice(gen: TextGenerator, context: str, question: str, experiments: Sequence[str],
               fallback: int, step: int, seed: int) -> Choice:
    """The experiment the model names under most rotations of the MCQ (module docstring)."""
    k = len(experiments)
    votes = np.zeros(k, dtype=np.int64)
    parsed = 0
    for r in range(k):
        row = [(r + j) % k for j in range(k)]
        shown = [experiments[o] for o in row]
        reply = gen((Message("user", f"{context}{mcq_text(question, shown)}"),),
                    seed=derive_seed(seed, step, r), max_new_tokens=MCQ_TOKENS, temperature=0.0)
        pos = parse_letter(reply, shown)
        if pos is not None:
            parsed += 1
            votes[row[pos]] += 1
    truth: dict[str, float | str] = {
        f"choice_parsed_{step}": float(parsed), f"choice_rotations_{step}": float(k),
        f"choice_votes_{step}": ",".join(str(int(v)) for v in votes)}
    if parsed == 0:
        return Choice(fallback, "fallback", truth | {f"choice_source_{step}": "fallback"})
    tied = np.flatnonzero(votes == votes.max())
    pick = int(tied[np.random.default_rng(derive_seed(seed, step, k)).integers(tied.size)])
    return Choice(pick, "mcq", truth | {f"choice_source_{step}": "mcq"})
