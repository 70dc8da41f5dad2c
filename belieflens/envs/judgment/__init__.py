"""Judgment environments (BayesBench Task 3): social judgment and medical triage."""

from belieflens.envs.judgment.case import SOCIAL_LABELS, TRIAGE_LABELS, Case, Segment
from belieflens.envs.judgment.cases import load, load_bayesbench, load_builtin
from belieflens.envs.judgment.social import SocialJudgment, SocialJudgmentParams
from belieflens.envs.judgment.styles import SOCIAL_STYLES, TRIAGE_STYLES, Style
from belieflens.envs.judgment.triage import MedicalTriage, MedicalTriageParams

__all__ = [
    "SOCIAL_LABELS",
    "SOCIAL_STYLES",
    "TRIAGE_LABELS",
    "TRIAGE_STYLES",
    "Case",
    "MedicalTriage",
    "MedicalTriageParams",
    "Segment",
    "SocialJudgment",
    "SocialJudgmentParams",
    "Style",
    "load",
    "load_bayesbench",
    "load_builtin",
]
