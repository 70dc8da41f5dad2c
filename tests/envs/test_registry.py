"""The registry: every environment owns its report sections, as function objects."""

from __future__ import annotations

import inspect

from belieflens import envs
from belieflens.envs.belief_attribution.report import belief_attribution_section
from belieflens.envs.dutch_book.report import dutch_book_section
from belieflens.envs.judgment.report import judgment_section
from belieflens.envs.protein_world.report import protein_world_section
from belieflens.envs.recommender.report import recommender_section
from belieflens.envs.revealed.report import revealed_section
from belieflens.envs.tokens.report import tokens_section
from belieflens.envs.twenty_questions.report import twenty_questions_section
from belieflens.report.section import SectionFn


def test_every_environment_declares_callable_sections() -> None:
    for name in envs.names():
        declared = envs.environment_class(name).sections
        assert len(set(declared)) == len(declared), name
        for fn in declared:
            params = list(inspect.signature(fn).parameters)
            assert params[:2] == ["ds", "out_dir"] and "method" in params, (name, fn)
        assert envs.sections_for(name) == declared


def test_sections_per_environment_as_before() -> None:
    """The environment -> section table the string registry had."""
    expected: dict[str, SectionFn] = {
        "dutch-book": dutch_book_section,
        "protein-world": protein_world_section,
        "belief-attribution": belief_attribution_section,
        "recommender": recommender_section,
        "social-judgment": judgment_section,
        "medical-triage": judgment_section,
        "twenty-questions": twenty_questions_section,
        **{e: revealed_section for e in ("dice", "coins", "preference", "choice", "case-study")},
        **{e: tokens_section for e in ("coin-tokens", "mess3", "rrxor", "z1r", "hmm")},
    }
    for name in envs.names():
        want = (expected[name],) if name in expected else ()
        assert envs.sections_for(name) == want, name
    assert envs.sections_for("coin-flip") == ()
    assert envs.sections_for("no-such-environment") == ()
