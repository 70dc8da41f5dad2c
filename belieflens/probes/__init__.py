"""Probes: belief questions turned into token-aligned read-outs.

The questions themselves are built in the environment layer
(:mod:`belieflens.envs.questions`, :mod:`belieflens.envs.latin`); they are re-exported
here under their public names.
"""

from belieflens.envs.latin import latin_square
from belieflens.envs.questions import completion_probe, mcq_probe, mcq_text
from belieflens.probes.latin import debias
from belieflens.probes.render import TokenizedQuery, render

__all__ = [
    "TokenizedQuery",
    "completion_probe",
    "debias",
    "latin_square",
    "mcq_probe",
    "mcq_text",
    "render",
]
