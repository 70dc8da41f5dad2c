"""Medical triage (BayesBench Task 3b): urgency, from Emergency to Routine, as symptoms arrive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from belieflens.envs.judgment.case import Kind
from belieflens.envs.judgment.env import JudgmentEnvironment, JudgmentParams
from belieflens.envs.judgment.task import TRIAGE, Task


@dataclass(frozen=True)
class MedicalTriageParams(JudgmentParams):
    """Parameters of the medical-triage environment (styles: accurate, hypochondriac, minimizer,
    cyberchondriac)."""

    KIND: ClassVar[Kind] = "triage"


class MedicalTriage(JudgmentEnvironment):
    """Medical triage: a patient describes a problem segment by segment; probe: the urgency.

    Passive episodes deliver the clean segments; active ones deliver each segment as
    rewritten by a simulator in the accurate, hypochondriac, minimizer or
    cyberchondriac style. After every turn: the urgency distribution, the style
    posterior p(z_f | x) and, for each style written into the prompt, the urgency
    given that style (analysis picks the model's most likely one).
    """

    name: ClassVar[str] = "medical-triage"
    Params: ClassVar[type[JudgmentParams]] = MedicalTriageParams
    TASK: ClassVar[Task] = TRIAGE
