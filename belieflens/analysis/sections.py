"""Environment-specific analysis sections appended to ``belieflens analyze``.

The generic analysis (beliefs per turn, logit lens per layer) runs on every cache file. An
environment that needs more (revealed vs stated answers, Dutch books, attribution scores, ...)
names its sections in its class (``sections``, a tuple of
:data:`~belieflens.types.SectionName`); :data:`SECTIONS` maps each name to its function in
:mod:`belieflens.analysis.envs`, and ``analyze`` calls every section of the file's environment.
"""

from __future__ import annotations

from belieflens import envs
from belieflens.analysis.envs.belief_attribution.section import belief_attribution_section
from belieflens.analysis.envs.dutch_book.section import dutch_book_section
from belieflens.analysis.envs.judgment.section import judgment_section
from belieflens.analysis.envs.protein_world.section import protein_world_section
from belieflens.analysis.envs.recommender.section import recommender_section
from belieflens.analysis.envs.revealed.section import revealed_section
from belieflens.analysis.envs.section import SectionFn
from belieflens.analysis.envs.twenty_questions.section import twenty_questions_section
from belieflens.types import SectionName

SECTIONS: dict[SectionName, SectionFn] = {
    "dutch-book": dutch_book_section,
    "protein-world": protein_world_section,
    "belief-attribution": belief_attribution_section,
    "recommender": recommender_section,
    "judgment": judgment_section,
    "revealed": revealed_section,
    "twenty-questions": twenty_questions_section,
}
"""Every section name's implementation."""


def sections_for(env: str) -> list[SectionFn]:
    """The section functions of environment ``env`` in its declared order (none for a name
    that is not a registered environment)."""
    if env not in envs.names():
        return []
    return [SECTIONS[name] for name in envs.environment_class(env).sections]


__all__ = ["SECTIONS", "sections_for"]
