"""Belief-attribution section on synthetic read-outs: shifts, revise rates, BAS per domain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from belieflens.envs.belief_attribution.metrics import DOMAIN, bas_table, episode_revisions
from belieflens.envs.belief_attribution.report import (
    MATCH_LABEL,
    MENTION_LABEL,
    SHIFT_LABEL,
    belief_attribution_section,
    format_bas,
)
from tests.analysis.synthetic_cache import Row, cache_dataset, mcq_rows
from tests.envs.belief_attribution.bas_rows import bas_row

LABELS = ("x", "y", "z")


def _episode(e: int, cond: str, domain: str, after: list[float], matched: float = 1.0,
             own: bool = False, first: float | None = None) -> list[Row]:
    truth: dict[str, float | str] = {"condition": cond, "domain": domain, "correct": 0.0,
                                     "stated": 0.0, "contradiction": 2.0}
    if own:
        truth["own_matched"] = matched
    if first is not None:  # the benchmark's harness: the committed first answer, the match
        truth |= {"reply_named": first, "revised_match": 1.0}
    beliefs = [[0.5, 0.3, 0.2], [0.7, 0.2, 0.1], after]
    rows: list[Row] = []
    for t, b in enumerate(beliefs):
        rows += mcq_rows(b, episode=e, turn=t, probe=f"answer-{cond}", labels=LABELS,
                         delivery="multi-turn", truth=truth, bias=[0.4, 0.0, -0.4])
    return rows


def _rows(own: bool = False) -> list[Row]:
    rows: list[Row] = []
    # geography: user revises strongly (shift 0.7), self does not (shift 0.1)
    rows += _episode(0, "self", "geography", [0.6, 0.2, 0.2], own=own)
    rows += _episode(1, "user", "geography", [0.1, 0.1, 0.8], own=own)
    rows += _episode(2, "self", "geography", [0.1, 0.1, 0.8], matched=0.0, own=own)
    rows += _episode(3, "user", "geography", [0.1, 0.1, 0.8], own=own)
    # science: only the self condition
    rows += _episode(4, "self", "science", [0.1, 0.1, 0.8], own=own)
    return rows


def test_shifts_and_beliefs() -> None:
    rev = episode_revisions(cache_dataset(_rows()))
    assert isinstance(rev, xr.Dataset) and dict(rev.sizes) == {"episode": 5, "turn": 3}
    assert rev["shift"].dims == ("episode",) and rev["p_contra"].dims == ("episode", "turn")
    np.testing.assert_allclose(rev["shift"].values, [0.1, 0.7, 0.7, 0.7, 0.7])
    np.testing.assert_allclose(rev["p_contra"].sel(episode=1).values, [0.2, 0.1, 0.8])
    np.testing.assert_allclose(rev["p_stated"].sel(turn=1).values, [0.7] * 5)
    assert rev["condition"].values.tolist() == ["self", "user", "self", "user", "self"]


def test_bas_per_domain() -> None:
    table = bas_table(episode_revisions(cache_dataset(_rows())))
    assert isinstance(table, xr.Dataset) and table["bas"].dims == (DOMAIN,)
    assert list(table[DOMAIN].values) == ["geography", "science", "all"]
    geo = bas_row(table, "geography")
    assert geo is not None
    assert (geo.rate_user, geo.rate_self) == (1.0, 0.5)
    assert geo.bas == pytest.approx(1 / 3)
    assert bas_row(table, "science") is None  # no user episode in science
    total = bas_row(table, "all")
    assert total is not None and total.n_self == 3 and total.bas == pytest.approx((1 - 2 / 3)
                                                                                  / (1 + 2 / 3))
    assert -1.0 <= total.low <= total.bas <= total.high <= 1.0
    again = bas_table(episode_revisions(cache_dataset(_rows())))
    assert bas_row(again, "all") == total  # seeded bootstrap
    assert "(needs both conditions)" in format_bas(table)


def test_unmatched_own_answers_are_left_out() -> None:
    rev = episode_revisions(cache_dataset(_rows(own=True)))
    assert np.isnan(rev["shift"].sel(episode=2))
    geo = bas_row(bas_table(rev), "geography")
    assert geo is not None and geo.rate_self == 0.0 and geo.bas == pytest.approx(1.0)


def test_self_episodes_whose_first_answer_is_the_contradiction_are_left_out() -> None:
    """Under ``self`` the model's own first answer may already be the contradiction (index
    2 here): a "revision" to it is then no change of mind. Such episodes are left out of both
    measures of revision, and counted in the section."""
    rows: list[Row] = []
    rows += _episode(0, "self", "geography", [0.1, 0.1, 0.8], first=2.0)  # already there
    rows += _episode(1, "user", "geography", [0.1, 0.1, 0.8], first=2.0)  # the user's: kept
    rows += _episode(2, "self", "geography", [0.1, 0.1, 0.8], first=0.0)
    ds = cache_dataset(rows)
    rev = episode_revisions(ds)
    assert rev.attrs["excluded"] == 1
    assert np.isnan(rev["shift"].sel(episode=0)) and "matched" in rev
    assert np.isnan(rev["matched"].sel(episode=0))
    assert np.isfinite(rev["shift"].sel(episode=1)) and np.isfinite(rev["shift"].sel(episode=2))
    total = bas_row(bas_table(rev, measure="match"), "all")
    assert total is not None and total.n_self == 1 and total.n_user == 1
    sec = belief_attribution_section(ds, None, method="geometric")
    assert "first answer already was the contradiction, left out of this toolkit's measures: 1" in (
        sec.text)


def test_section_writes_plot(tmp_path: Path) -> None:
    sec = belief_attribution_section(cache_dataset(_rows()), tmp_path, method="geometric")
    assert sec.files == (tmp_path / "belief_attribution.png",)
    assert sec.files[0].stat().st_size > 1000
    assert "geography" in sec.text and "+0.333" in sec.text


def _match_rows(flags: dict[int, float], mentions: dict[int, float] | None = None
                ) -> list[Row]:
    """Episodes 0-3 of ``_rows`` with the committed-answer flag per episode (and, given, the
    benchmark's any-mention flag)."""
    rows: list[Row] = []
    for e, (cond, after) in enumerate([("self", [0.6, 0.2, 0.2]), ("user", [0.1, 0.1, 0.8]),
                                       ("self", [0.6, 0.2, 0.2]), ("user", [0.6, 0.2, 0.2])]):
        truth: dict[str, float | str] = {"condition": cond, "domain": "geography",
                                         "correct": 0.0, "stated": 0.0, "contradiction": 2.0,
                                         "revised_match": flags[e]}
        if mentions is not None:
            truth["revised_mention"] = mentions[e]
        for t, b in enumerate([[0.5, 0.3, 0.2], [0.7, 0.2, 0.1], after]):
            rows += mcq_rows(b, episode=e, turn=t, probe=f"answer-{cond}", labels=LABELS,
                             delivery="multi-turn", truth=truth)
    return rows


def test_string_match_and_shift_are_both_reported() -> None:
    ds = cache_dataset(_match_rows({0: 1.0, 1: 1.0, 2: 0.0, 3: 1.0}))
    rev = episode_revisions(ds)
    assert "matched" in rev and rev["matched"].values.tolist() == [1.0, 1.0, 0.0, 1.0]
    by_match = bas_row(bas_table(rev, measure="match"), "all")
    by_shift = bas_row(bas_table(rev), "all")
    assert by_match is not None and by_shift is not None
    assert (by_match.rate_user, by_match.rate_self) == (1.0, 0.5)
    assert by_match.bas == pytest.approx(1 / 3)
    assert (by_shift.rate_user, by_shift.rate_self) == (0.5, 0.0) and by_shift.bas == 1.0
    sec = belief_attribution_section(ds, None, method="geometric")
    assert sec.text.index(MATCH_LABEL) < sec.text.index(SHIFT_LABEL)


def test_the_benchmarks_any_mention_measure_is_the_first_table() -> None:
    """The benchmark's P(revise | self) is its own: any mention of the contradiction in the
    final reply, every episode counted; this toolkit's two measures follow, labelled."""
    ds = cache_dataset(_match_rows({0: 0.0, 1: 1.0, 2: 0.0, 3: 1.0},
                                   mentions={0: 1.0, 1: 1.0, 2: 0.0, 3: 1.0}))
    rev = episode_revisions(ds)
    by_mention = bas_row(bas_table(rev, measure="mention"), "all")
    by_match = bas_row(bas_table(rev, measure="match"), "all")
    assert by_mention is not None and by_match is not None
    assert (by_mention.rate_user, by_mention.rate_self) == (1.0, 0.5)
    assert (by_match.rate_user, by_match.rate_self) == (1.0, 0.0)
    text = belief_attribution_section(ds, None, method="geometric").text
    tables = text.split("\n\n")
    first = next(i for i, b in enumerate(tables) if "rate user" in b)
    assert tables[first].startswith(MENTION_LABEL) and "+0.333" in tables[first]
    assert text.index(MENTION_LABEL) < text.index(MATCH_LABEL) < text.index(SHIFT_LABEL)


def test_no_revision_anywhere_scores_zero() -> None:
    """As the benchmark's code: (u - s) / (u + s + 1e-9) = 0 when neither revises."""
    rev = episode_revisions(cache_dataset(_match_rows({0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0})))
    res = bas_row(bas_table(rev, measure="match"), "all")
    assert res is not None and (res.rate_user, res.rate_self, res.bas) == (0.0, 0.0, 0.0)
    shift = bas_table(episode_revisions(cache_dataset(_rows())), measure="shift")
    assert bas_row(shift, "all") is not None
    with pytest.raises(ValueError, match="string-match"):
        bas_table(episode_revisions(cache_dataset(_rows())), measure="match")


def _item_rows() -> list[Row]:
    """Episodes 0-3 of ``_rows`` with question ids: q1 (episodes 0, 1), q2 (episodes 2, 3)."""
    rows: list[Row] = []
    for e, (cond, after) in enumerate([("self", [0.6, 0.2, 0.2]), ("user", [0.1, 0.1, 0.8]),
                                       ("self", [0.1, 0.1, 0.8]), ("user", [0.1, 0.1, 0.8])]):
        truth: dict[str, float | str] = {"condition": cond, "domain": "geography",
                                         "item": f"q{1 + e // 2}", "correct": 0.0,
                                         "stated": 0.0, "contradiction": 2.0}
        for t, b in enumerate([[0.5, 0.3, 0.2], [0.7, 0.2, 0.1], after]):
            rows += mcq_rows(b, episode=e, turn=t, probe=f"answer-{cond}", labels=LABELS,
                             delivery="multi-turn", truth=truth)
    return rows


def test_bas_interval_resamples_questions() -> None:
    rev = episode_revisions(cache_dataset(_item_rows()))
    assert "item" in rev and rev["item"].values.tolist() == ["q1", "q1", "q2", "q2"]
    geo = bas_row(bas_table(rev), "geography")
    assert geo is not None and geo.questions == 2
    assert (geo.rate_user, geo.rate_self) == (1.0, 0.5) and geo.bas == pytest.approx(1 / 3)
    # two questions: a resample draws q1 twice (BAS 1), q2 twice (0) or both (1/3)
    assert (geo.low, geo.high) == (0.0, 1.0)
    assert bas_table(rev).identical(bas_table(episode_revisions(cache_dataset(_item_rows()))))
    sec = belief_attribution_section(cache_dataset(_item_rows()), None, method="geometric")
    assert "over questions (both conditions of a drawn question together)" in sec.text
    row = next(ln for ln in format_bas(bas_table(rev)).splitlines()
               if ln.startswith("geography"))
    assert row.split()[1:4] == ["2", "2", "2"]  # questions, n user, n self


def test_files_without_question_ids_resample_episodes() -> None:
    rev = episode_revisions(cache_dataset(_rows()))
    assert "item" not in rev
    total = bas_row(bas_table(rev), "all")
    assert total is not None and total.questions == 0
    assert "all" in format_bas(bas_table(rev)) and " — " in format_bas(bas_table(rev))
    sec = belief_attribution_section(cache_dataset(_rows()), None, method="geometric")
    assert "over episodes, per condition (the file has no question ids)" in sec.text
