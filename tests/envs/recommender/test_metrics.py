"""Recommender aggregation and metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import xarray as xr

from belieflens.envs.recommender.metrics import (
    at_argmax_type,
    expected_rating,
    marginalised,
    rating_abs_error,
    scores,
)


def _dist(values: Sequence[Sequence[float]] | Sequence[float], dims: list[str]) -> xr.DataArray:
    return xr.DataArray(np.asarray(values, dtype=np.float64), dims=dims)


P_TYPE = _dist([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]], ["query", "type"])
COND = _dist(
    [
        [1, 0, 0, 0, 0],
        [0, 0, 0, 0, 1],
        [0, 0, 1, 0, 0],
    ],
    ["type", "outcome"],
)


def test_at_argmax_picks_the_model_type() -> None:
    got = at_argmax_type(P_TYPE, COND)
    assert got.dims == ("query", "outcome")
    assert np.allclose(got.values, [[0, 0, 0, 0, 1], [1, 0, 0, 0, 0]])


def test_marginalised_mixes_by_the_type_belief() -> None:
    got = marginalised(P_TYPE, COND)
    assert np.allclose(got.values, [[0.1, 0, 0.2, 0, 0.7], [0.5, 0, 0.25, 0, 0.25]])
    assert np.allclose(got.sum("outcome"), 1.0)


def test_expected_rating_and_mae() -> None:
    uniform = _dist([0.2] * 5, ["outcome"])
    assert float(expected_rating(uniform)) == pytest.approx(3.0)
    five = _dist([0, 0, 0, 0, 1], ["outcome"])
    assert float(rating_abs_error(uniform, five)) == pytest.approx(2.0)
    assert float(rating_abs_error(uniform, xr.DataArray(4.0))) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        expected_rating(_dist([0.5, 0.5], ["outcome"]))


def test_scores_zero_at_the_oracle() -> None:
    oracle_y = marginalised(P_TYPE, COND)
    s = scores(P_TYPE, oracle_y, P_TYPE, oracle_y, COND)
    for name in ("tvd_z", "tvd_y", "mae_y", "tvd_y_marginal", "mae_y_marginal"):
        assert np.allclose(s[name], 0.0)
    assert float(s["tvd_y_argmax"][0]) == pytest.approx(0.3)
    assert set(s.data_vars) >= {"tvd_y_argmax", "mae_y_argmax"}


def test_scores_without_conditionals_and_nan_propagates() -> None:
    nan = P_TYPE.copy()
    nan[0, 0] = np.nan
    y = _dist([[0.2] * 5, [0.2] * 5], ["query", "outcome"])
    s = scores(nan, y, P_TYPE, y)
    assert set(s.data_vars) == {"tvd_z", "tvd_y", "mae_y"}
    assert np.isnan(s["tvd_z"][0]) and not np.isnan(s["tvd_z"][1])
