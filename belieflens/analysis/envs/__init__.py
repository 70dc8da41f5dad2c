"""Environment-specific analysis, one subpackage per environment family.

Each environment class names the report sections it needs (``sections``, a tuple of
:data:`~belieflens.types.SectionName`); :mod:`belieflens.analysis.sections` maps every
section name to its function here:

- :mod:`.dutch_book`: credences, sure-loss constructions and the arbitrage finder.
- :mod:`.protein_world`: posterior tracking over the experiment sequence.
- :mod:`.belief_attribution`: revision and attribution scores.
- :mod:`.recommender`: type posterior and rating predictions against the oracle.
- :mod:`.judgment`: social judgment and medical triage (invariance, engagement gaps).
- :mod:`.revealed`: revealed belief vs stated answer (dice, coins, preference, choice, case study).

Every section function has the signature of :class:`~belieflens.analysis.envs.section.SectionFn`.
"""
