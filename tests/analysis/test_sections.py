"""Every section name has an implementation, and every environment's sections exist."""

from __future__ import annotations

from typing import get_args

from belieflens import envs
from belieflens.analysis.sections import SECTIONS, sections_for
from belieflens.types import SECTION_NAMES, SectionName


def test_every_section_name_is_implemented() -> None:
    assert get_args(SectionName) == SECTION_NAMES
    assert set(SECTIONS) == set(SECTION_NAMES)
    assert all(callable(fn) for fn in SECTIONS.values())


def test_every_environment_declares_existing_sections() -> None:
    used: set[str] = set()
    for name in envs.names():
        declared = envs.environment_class(name).sections
        assert len(set(declared)) == len(declared), name
        assert all(s in SECTIONS for s in declared), (name, declared)
        assert sections_for(name) == [SECTIONS[s] for s in declared]
        used.update(declared)
    assert used == set(SECTION_NAMES)  # no section is left without an environment


def test_sections_per_environment_as_before() -> None:
    """The environment -> section table the string registry had."""
    expected: dict[str, SectionName] = {
        "dutch-book": "dutch-book",
        "protein-world": "protein-world",
        "belief-attribution": "belief-attribution",
        "recommender": "recommender",
        "social-judgment": "judgment",
        "medical-triage": "judgment",
        "twenty-questions": "twenty-questions",
        **{e: "revealed" for e in ("dice", "coins", "preference", "choice", "case-study")},
    }
    for name in envs.names():
        want = [SECTIONS[expected[name]]] if name in expected else []
        assert sections_for(name) == want, name
    assert sections_for("coin-flip") == []
    assert sections_for("no-such-environment") == []
