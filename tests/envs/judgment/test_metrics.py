"""Judgment metrics: accuracy, MAE, invariance spread with SEM, gaps, confusion matrices."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from belieflens.analysis.stats import mean_sem
from belieflens.envs.judgment.metrics import (
    accuracy,
    at_argmax,
    confusion,
    expected_level,
    level_abs_error,
    passive_active_gap,
    predicted,
    scalar_spread,
    style_spread,
)

LABELS = ("Emergency", "Urgent", "Observation", "Routine")


def _p(values: object, dims: list[str]) -> xr.DataArray:
    return xr.DataArray(np.asarray(values, dtype=np.float64), dims=dims)


def test_accuracy_and_mae() -> None:
    p = _p([[0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.5, 0.5], [np.nan] * 4], ["case", "outcome"])
    truth = _p([0, 3, 1], ["case"])
    assert np.array_equal(predicted(p).values[:2], [0, 2]) and np.isnan(predicted(p).values[2])
    acc = accuracy(p, truth)
    assert acc.values[:2].tolist() == [1.0, 0.0] and np.isnan(acc.values[2])
    assert expected_level(p).values[1] == pytest.approx(2.5)
    err = level_abs_error(p, truth)
    assert err.values[0] == pytest.approx(0.6) and err.values[1] == pytest.approx(0.5)


def test_style_spread_is_zero_iff_invariant() -> None:
    same = _p([[[0.2, 0.8]] * 3, [[0.9, 0.1]] * 3], ["case", "style", "outcome"])
    assert np.allclose(style_spread(same), 0.0)
    differ = _p([[[1, 0], [0, 1], [0.5, 0.5]]], ["case", "style", "outcome"])
    # centre (0.5, 0.5): TVDs 0.5, 0.5, 0 -> mean 1/3
    assert float(style_spread(differ)[0]) == pytest.approx(1 / 3)
    assert float(scalar_spread(_p([[1.0, 3.0, 2.0]], ["case", "style"]))[0]) == 2.0


def test_mean_sem() -> None:
    out = mean_sem(_p([1.0, 2.0, 3.0, np.nan], ["case"]), "case")
    assert float(out["mean"]) == pytest.approx(2.0)
    assert float(out["sem"]) == pytest.approx(1.0 / np.sqrt(3))
    assert int(out["n"]) == 3
    assert np.isnan(float(mean_sem(_p([1.0], ["case"]), "case")["sem"]))


def test_passive_active_gap() -> None:
    passive = _p([0.9, 0.5], ["case"])
    active = _p([[0.7, 0.5], [0.5, 0.1]], ["case", "style"])
    assert np.allclose(passive_active_gap(passive, active), [0.3, 0.2])
    assert passive_active_gap(passive, active, style_dim=None).dims == ("case", "style")


def test_at_argmax_style() -> None:
    p_style = _p([[0.1, 0.6, 0.2, 0.1]], ["case", "style"])
    given = _p(
        [[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]], ["case", "style", "outcome"]
    )
    assert np.allclose(at_argmax(given, p_style).values, [[0, 1, 0, 0]])


def test_confusion_counts() -> None:
    p = _p(
        [[0.9, 0.1, 0, 0], [0.1, 0.9, 0, 0], [0, 0, 0.2, 0.8], [0, 0, 0.8, 0.2], [np.nan] * 4],
        ["case", "outcome"],
    )
    truth = _p([0, 0, 3, 2, 1], ["case"])
    cm = confusion(p, truth, LABELS)
    assert cm.dims == ("truth", "predicted")
    assert int(cm.sum()) == 4
    assert int(cm.sel(truth="Emergency", predicted="Emergency")) == 1
    assert int(cm.sel(truth="Emergency", predicted="Urgent")) == 1
    assert int(cm.sel(truth="Routine", predicted="Routine")) == 1
    assert int(cm.sel(truth="Observation", predicted="Observation")) == 1
