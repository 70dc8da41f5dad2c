"""Judgment sections on synthetic cache files with known beliefs: invariance, gaps, confusion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from belieflens.envs import sections_for
from belieflens.envs.judgment.metrics import (
    accuracy_table,
    by_case,
    confusions,
    gaps,
    invariance,
    judgment_data,
    last_turn,
    triage,
)
from belieflens.envs.judgment.report import (
    format_accuracy,
    format_gaps,
    format_invariance,
    format_triage,
    judgment_section,
)
from tests.analysis.synthetic_cache import Row, cache_dataset, mcq_rows

VERDICT = ("YTA", "NTA")
URGENCY = ("Emergency", "Urgent", "Observation", "Routine")
STYLES = ("accurate", "hypochondriac", "minimizer", "cyberchondriac")

# (case, true label index, style, final belief); case A has 1 segment, case B has 2
SOCIAL = [
    ("A", 0, "clean", [0.9, 0.1]),
    ("A", 0, "neutral", [0.9, 0.1]),
    ("A", 0, "defending", [0.2, 0.8]),  # flipped by the defending style
    ("B", 1, "clean", [0.3, 0.7]),
    ("B", 1, "neutral", [0.3, 0.7]),
    ("B", 1, "defending", [0.3, 0.7]),
]


def _social_rows(deliveries: tuple[str, ...] = ("single-turn",)) -> list[Row]:
    rows: list[Row] = []
    for d in deliveries:
        for e, (case, label, style, final) in enumerate(SOCIAL):
            truth: dict[str, float | str] = {
                "case": case, "label": VERDICT[label], "label_index": float(label),
                "style": style, "engagement": "passive" if style == "clean" else "active"}
            last = 1 if case == "A" else 2
            for t in range(last + 1):
                p = final if t == last else [0.5, 0.5]
                rows += mcq_rows(p, episode=e, turn=t, probe="verdict", labels=VERDICT,
                                 delivery=d, truth=truth, bias=[0.3, -0.3])
    return rows


def test_last_turn_skips_turns_a_case_does_not_have() -> None:
    d = judgment_data(cache_dataset(_social_rows()))
    final = d["final"].sel(delivery="single-turn")
    assert np.allclose(final.values[:, 0], [s[3][0] for s in SOCIAL])
    assert last_turn(d["belief"]).sizes == d["final"].sizes


def test_tables_match_hand_computation() -> None:
    d = judgment_data(cache_dataset(_social_rows(("single-turn", "multi-turn"))))
    assert d.attrs["probe"] == "verdict" and d.attrs["labels"] == VERDICT
    assert "style_final" not in d
    inv, gap = format_invariance(invariance(d)), format_gaps(gaps(d))
    # invariance: case A spread 0.35 (each style 0.35 from the mean), case B 0 -> 0.175 ± 0.175
    row = next(line for line in inv.splitlines() if line.startswith("single-turn"))
    assert row.split() == ["single-turn", "0.175±0.175", "0.350±0.350", "2"]
    # accuracy gap: A 1 - 0.5, B 0 -> 0.25 ± 0.25; defending costs 0.5 on average
    assert "0.250±0.250" in gap and "defending +0.500" in gap
    matrices = confusions(d)
    active = matrices.sel(delivery="single-turn", engagement="active").values
    assert active.tolist() == [[1, 1], [0, 2]]
    passive = matrices.sel(delivery="multi-turn", engagement="passive").values
    assert passive.tolist() == [[1, 0], [0, 1]]
    # per-style accuracy rows: defending is right on one case of two
    row = next(line for line in format_accuracy(accuracy_table(d)).splitlines()
               if line.startswith("single-turn") and "defending" in line)
    assert row.split()[2] == "0.500±0.500"


def test_failed_simulations_are_left_out_of_invariance_and_gaps() -> None:
    rows = _social_rows()
    for i, r in enumerate(rows):  # the defending episode of case A: simulation failed
        if r.episode == 2:
            rows[i] = Row(**{**r.__dict__, "truth": {**r.truth, "sim_failures": 1.0}})
        elif r.episode in (1, 4, 5):
            rows[i] = Row(**{**r.__dict__, "truth": {**r.truth, "sim_failures": 0.0}})
    d = judgment_data(cache_dataset(rows))
    inv, gap = format_invariance(invariance(d)), format_gaps(gaps(d))
    assert invariance(d).attrs["left_out"] == 1
    assert "left out: 1 active episode(s)" in inv and "left out" in gap
    row = next(line for line in inv.splitlines() if line.startswith("single-turn"))
    assert row.split()[1:] == ["0.000", "0.000", "1"]  # only case B has two simulated styles
    row = next(line for line in gap.splitlines() if line.startswith("single-turn"))
    assert row.split()[1] == "0.000±0.000"
    # accuracy and confusion still count every episode
    assert confusions(d).sel(delivery="single-turn", engagement="active").values.sum() == 4


def test_by_case_averages_repeats() -> None:
    rows = _social_rows()
    # a repeat of case A / neutral with belief [0.5, 0.5] at its last turn
    truth: dict[str, float | str] = {"case": "A", "label": "YTA", "label_index": 0.0,
                                     "style": "neutral", "engagement": "active"}
    for t, p in ((0, [0.5, 0.5]), (1, [0.5, 0.5])):
        rows += mcq_rows(p, episode=6, turn=t, probe="verdict", labels=VERDICT, truth=truth)
    d = judgment_data(cache_dataset(rows))
    grid = by_case(d["final"], d["case"], d["style"], ["neutral", "defending"])
    assert float(grid.sel(delivery="single-turn", case="A", style="neutral")[0]) == \
        pytest.approx(0.7)


def _triage_rows() -> list[Row]:
    rows: list[Row] = []
    # one active hypochondriac episode of an Observation case; the direct urgency says
    # Emergency, the urgency given the (correctly recognised) style says Observation
    truth: dict[str, float | str] = {"case": "T1", "label": "Observation", "label_index": 2.0,
                                     "style": "hypochondriac", "engagement": "active",
                                     "sim_failures": 1.0, "sim_attempts": 4.0}
    for t in (0, 1):
        rows += mcq_rows([0.7, 0.1, 0.1, 0.1], episode=0, turn=t, probe="urgency",
                         labels=URGENCY, truth=truth)
        rows += mcq_rows([0.1, 0.6, 0.2, 0.1], episode=0, turn=t, probe="style",
                         labels=STYLES, truth=truth)
        for s in STYLES:
            p = [0.1, 0.1, 0.7, 0.1] if s == "hypochondriac" else [0.1, 0.1, 0.1, 0.7]
            rows += mcq_rows(p, episode=0, turn=t, probe=f"urgency|style={s}",
                             labels=URGENCY, truth=truth)
    return rows


def test_triage_style_posterior_and_conditioned_urgency(tmp_path: Path) -> None:
    ds = cache_dataset(_triage_rows(), {"env_name": "medical-triage"})
    d = judgment_data(ds)
    assert d.attrs["probe"] == "urgency" and d.attrs["style_labels"] == STYLES
    assert "conditioned_final" in d
    assert int(d["conditioned_final"].isel(delivery=0, episode=0).argmax("outcome")) == 2
    row = format_triage(triage(d)).splitlines()[1].split()
    assert row[:4] == ["single-turn", "1.000", "1.000", "0.200"]  # E[level] 1.8 vs 2
    assert "needs active episodes in at least 2 styles" in format_invariance(invariance(d))
    assert "engagement=both" in format_gaps(gaps(d))
    (fn,) = sections_for("medical-triage")
    sec = fn(ds, tmp_path, method="geometric")
    assert "1 segment(s) failed every attempt" in sec.text and "4 simulator calls" in sec.text
    assert [p.name for p in sec.files] == ["medical-triage.png"]


def test_social_section_registered(tmp_path: Path) -> None:
    ds = cache_dataset(_social_rows(), {"env_name": "social-judgment"})
    (fn,) = sections_for("social-judgment")
    assert fn is judgment_section
    sec = fn(ds, None, method="arithmetic")
    assert sec.title == "social-judgment: invariance and accuracy" and sec.files == ()
    assert "-- Invariance across styles" in sec.text and "Style posterior" not in sec.text


def test_metrics_are_xarray_with_named_dims() -> None:
    d = judgment_data(cache_dataset(_social_rows(("single-turn", "multi-turn"))))
    assert d["belief"].dims == ("delivery", "episode", "turn", "outcome")
    assert d["final"].dims == ("delivery", "episode", "outcome")
    assert all(d[k].dims == ("episode",) for k in ("truth", "case", "style", "engagement"))
    acc = accuracy_table(d)
    assert isinstance(acc, xr.Dataset) and acc["acc_mean"].dims == ("delivery", "style")
    inv = invariance(d)
    assert inv["spread_mean"].dims == ("delivery",)
    assert inv["spread"].dims == ("delivery", "case")
    gap = gaps(d)
    assert gap["acc_mean"].dims == ("delivery",)
    assert gap["acc_by_style"].dims == ("delivery", "style")
    assert confusions(d).dims == ("delivery", "engagement", "truth", "predicted")
    triaged = triage(judgment_data(cache_dataset(_triage_rows())))
    assert triaged["style_mean"].dims == ("delivery",) and "cond_acc_mean" in triaged
