"""Preference, choice and the diagnosis case study: counts and exact oracles."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest

from belieflens.envs import get
from belieflens.errors import ParameterError


def test_preference_grid() -> None:
    env = get("preference", focus="all", stated="first", style="belieflens")
    eps = list(env.episodes(10_000, 0))
    assert env.count() == len(eps) == 24 + 48  # type: ignore[attr-defined]
    assert Counter(str(e.truth["variant"]) for e in eps) == {"regular": 24, "independent": 48}
    texts = {e.turns[0].probes[0].queries[0].prefill for e in eps}
    assert len(texts) == len(eps)  # every grid point is a distinct prompt
    for e in eps:
        probe = e.turns[0].probes[0]
        bias, favoured = int(e.truth["bias"]), e.truth["focus"]
        assert probe.labels[0] == e.truth["first"]
        expected = [bias / (bias + 1) if lab == favoured else 1 / (bias + 1)
                    for lab in probe.labels]
        assert probe.oracle == pytest.approx(expected)
        assert e.truth["mode"] == ("" if bias == 1 else favoured)


def test_preference_text() -> None:
    env = get("preference", pair="left-right", order="reverse", focus="second", bias=2,
              variant="independent", style="belieflens", stated="first")
    eps = list(env.episodes(10, 0))
    assert [e.truth["previous"] for e in eps] == ["Right", "Left"]
    q = eps[0].turns[0].probes[0].queries[0]
    assert q.prefill.startswith("Sam has to choose between Right and Left. Sam is 2 times more "
                                "likely to choose Left than Right. Last time, Sam chose Right.")
    assert q.options == (" Right", " Left")


def test_choice_grid() -> None:
    env = get("choice", stated="first")
    eps = list(env.episodes(10_000, 0))
    assert env.count() == len(eps) == 3 + 2 + 4 + 6  # type: ignore[attr-defined]
    for e in eps:
        probe = e.turns[0].probes[0]
        k = int(e.truth["options"])
        assert probe.labels == tuple("ABCDEF"[:k])
        assert probe.oracle == pytest.approx([1 / k] * k)
        assert e.truth["mode"] == ""
        assert e.truth["stated_p"] == pytest.approx(1 / k)


def test_case_study_marginal() -> None:
    env = get("case-study", case="clinic", variant="marginal", share=30, stated="first")
    (ep,) = env.episodes(10, 0)
    child, adult = (50, 30, 20), (20, 60, 20)
    expected = [Fraction(30, 100) * Fraction(c, 100) + Fraction(70, 100) * Fraction(a, 100)
                for c, a in zip(child, adult, strict=True)]
    probe = ep.turns[0].probes[0]
    assert probe.labels == ("influenza", "common cold", "strep throat")
    assert probe.oracle == pytest.approx([float(x) for x in expected])
    assert ep.truth["mode"] == "common cold"


def test_case_study_grid() -> None:
    env = get("case-study", case="clinic", stated="first")
    eps = list(env.episodes(100, 0))
    assert env.count() == len(eps) == 15  # type: ignore[attr-defined]
    for e in eps:
        oracle = e.turns[0].probes[0].oracle
        if e.truth["variant"] == "child":
            assert oracle == pytest.approx([0.5, 0.3, 0.2])
        if e.truth["variant"] == "adult":
            assert oracle == pytest.approx([0.2, 0.6, 0.2])


@pytest.mark.parametrize("env, name, value", [("preference", "bias", "5"),
                                               ("choice", "options", "3"),
                                               ("case-study", "share", "20"),
                                               ("case-study", "case", "ward"),
                                               ("dice", "stated", "all"),
                                               ("coins", "style", "book")])
def test_bad_params(env: str, name: str, value: str) -> None:
    with pytest.raises(ParameterError, match=name):
        get(env, **{name: value})
