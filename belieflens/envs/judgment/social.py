"""Social judgment (BayesBench Task 3a): a verdict, YTA or NTA, on a story told piece by piece."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from belieflens.envs.judgment.case import Kind
from belieflens.envs.judgment.env import JudgmentEnvironment, JudgmentParams
from belieflens.envs.judgment.task import SOCIAL, Task


@dataclass(frozen=True)
class SocialJudgmentParams(JudgmentParams):
    """Parameters of the social-judgment environment (styles: neutral, conceding, defending)."""

    KIND: ClassVar[Kind] = "social"


class SocialJudgment(JudgmentEnvironment):
    """Social judgment: the poster tells a conflict segment by segment; probe: the verdict.

    Passive episodes deliver the clean segments; active ones deliver each segment
    as rewritten by a simulator in the neutral, conceding or defending style. The
    verdict (YTA/NTA) is read after every turn; there is no closed-form oracle, so
    analysis measures invariance across styles and accuracy against the label.
    """

    name: ClassVar[str] = "social-judgment"
    Params: ClassVar[type[JudgmentParams]] = SocialJudgmentParams
    TASK: ClassVar[Task] = SOCIAL
