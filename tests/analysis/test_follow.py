"""Follow (:mod:`belieflens.analysis.follow`): the output's move along the oracle's, its
intervals, and the floors' spread over networks."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from belieflens.analysis.follow import (
    INSTANCE_PAIR,
    episode_weights,
    follow_draws,
    interval,
    move_terms,
    ratio,
    seed_mean_draws,
)
from belieflens.dims import OUTCOME


def _da(x: np.ndarray) -> xr.DataArray:
    return xr.DataArray(x, dims=(INSTANCE_PAIR, OUTCOME))


def _follow(edited: np.ndarray, base: np.ndarray, d_oracle: np.ndarray) -> float:
    num, den, _ = move_terms(_da(edited), _da(base), _da(d_oracle))
    return float(num.sum() / den.sum())


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 30), st.integers(2, 5), st.floats(-2.0, 2.0), st.integers(0, 2**31))
def test_follow_is_the_share_of_the_oracles_move(n: int, k: int, share: float,
                                                 seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = rng.dirichlet(np.ones(k), size=n)
    d_oracle = rng.dirichlet(np.ones(k), size=n) - rng.dirichlet(np.ones(k), size=n)
    if np.abs(d_oracle).sum() < 1e-9:
        return
    assert _follow(base + share * d_oracle, base, d_oracle) == pytest.approx(share, abs=1e-9)


def test_a_move_across_the_oracles_adds_nothing() -> None:
    base = np.array([[0.5, 0.5, 0.0]])
    d_oracle = np.array([[0.2, -0.2, 0.0]])
    across = np.array([[0.1, 0.1, -0.2]])  # orthogonal to the oracle's move
    assert _follow(base + across, base, d_oracle) == pytest.approx(0.0)
    _, _, moved = move_terms(_da(base + across), _da(base), _da(d_oracle))
    assert float(moved[0]) == pytest.approx(0.2)  # yet the output moved


def test_follow_is_undefined_where_the_oracle_does_not_move() -> None:
    assert np.isnan(ratio(np.array([0.3]), np.array([0.0]))[0])


def test_the_interval_covers_the_estimate_and_narrows_with_more_episodes() -> None:
    rng = np.random.default_rng(0)
    widths = []
    for n in (20, 320):
        den = rng.uniform(0.5, 1.5, n)
        num = den * (0.6 + 0.3 * rng.standard_normal(n))
        w = episode_weights(np.arange(n), np.random.default_rng(1))
        draws = follow_draws(num[:, None], den, w)[:, 0]
        lo, hi = interval(draws)
        assert lo <= num.sum() / den.sum() <= hi
        widths.append(float(hi - lo))
    assert widths[1] < widths[0] / 2


def test_pairs_of_one_base_episode_are_drawn_together() -> None:
    w = episode_weights(np.array([3, 3, 7, 7, 7]), np.random.default_rng(0), n=50)
    assert (w[:, 0] == w[:, 1]).all() and (w[:, 2] == w[:, 4]).all()
    assert (w[:, [0, 2]].sum(1) == 2).all()  # two episodes drawn each time


def test_the_floor_over_networks_covers_their_spread() -> None:
    # three networks that agree within each draw but differ from each other: resampling the
    # networks widens the interval beyond a single network's
    draws = np.zeros((2000, 3)) + np.array([0.0, 0.2, 0.4])
    lo, hi = interval(seed_mean_draws(draws, np.random.default_rng(0)))
    assert lo < 0.15 and hi > 0.25


def test_steering_follow_is_the_slope_in_units_of_the_decoded_move() -> None:
    from belieflens.analysis.follow import steer_follow

    dims = ("delivery", "probe", "layer")
    summ = xr.Dataset({f"{v}_{x}": (dims, np.full((1, 1, 2), val))
                       for v, val in (("slope", 0.2), ("control_slope", 0.01))
                       for x in ("mean", "sem")}, coords={"layer": [3, 6]})
    ds = xr.Dataset({"fold_gain": (("layer", "fold"), [[0.4, 0.4], [0.1, 0.3]])})
    f = steer_follow(summ, ds)
    assert f is not None
    np.testing.assert_allclose(f["follow_mean"].values[0, 0], [0.5, 1.0])
    assert steer_follow(summ, ds.assign(fold_gain=ds["fold_gain"] * np.nan)) is None


def test_no_pairs_give_no_follow_rather_than_an_error() -> None:
    w = episode_weights(np.array([], dtype=np.int64), np.random.default_rng(0), n=10)
    assert w.shape == (10, 0)
    assert np.isnan(follow_draws(np.zeros((0, 2)), np.zeros(0), w)).all()
