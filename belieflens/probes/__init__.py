"""Probes: belief questions turned into token-aligned read-outs."""

from belieflens.probes.latin import debias, latin_square
from belieflens.probes.mcq import completion_probe, mcq_probe, mcq_text
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
