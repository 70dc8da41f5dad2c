"""The evidence weight: the tempered posterior whose turn-to-turn changes fit a model's."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from belieflens.analysis.compare import updating_slope
from belieflens.analysis.evidence_weight import STRENGTH, evidence_weight

STRENGTHS = np.round(np.arange(0.01, 2.0001, 0.01), 2)


def coin_family(heads: np.ndarray, a0: float = 1.0, b0: float = 1.0) -> xr.DataArray:
    """The coin flip's tempered predictive (a0 + S·h) / (a0 + b0 + S·n) ``(strength,
    episode, turn)`` after the flips ``heads [episode, flip]`` (turn 0: no flip yet)."""
    h = np.concatenate([np.zeros((heads.shape[0], 1)), np.cumsum(heads, 1)], 1)
    n = np.arange(h.shape[1])[None]
    s = STRENGTHS[:, None, None]
    p = (a0 + s * h[None]) / (a0 + b0 + s * n[None])
    return xr.DataArray(p, dims=(STRENGTH, "episode", "turn"), coords={STRENGTH: STRENGTHS})


def flips(seed: int, episodes: int = 8, turns: int = 10) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((episodes, turns)) < rng.random((episodes, 1))).astype(float)


@settings(max_examples=25)
@given(st.sampled_from([0.05, 0.3, 0.47, 1.0, 1.5]), st.integers(0, 10**6),
       st.floats(-0.2, 0.2))
def test_a_tempered_posterior_measures_its_own_strength(s: float, seed: int,
                                                        offset: float) -> None:
    family = coin_family(flips(seed))
    est = family.sel({STRENGTH: s}).drop_vars(STRENGTH) + offset  # a level bias never enters
    w, lo, hi = evidence_weight(est, family, rng=np.random.default_rng(seed))
    assert abs(w - s) < 1e-3 and lo <= w + 1e-3 and hi >= w - 1e-3  # grid step 0.01


def test_it_is_not_the_updating_slope() -> None:
    """The S = 0.3 posterior's updating slope is far from 0.3; its evidence weight is 0.3."""
    family = coin_family(flips(1, episodes=6))
    oracle = family.sel({STRENGTH: 1.0}).drop_vars(STRENGTH)
    third = family.sel({STRENGTH: 0.3}).drop_vars(STRENGTH)
    slope = updating_slope(third, oracle)[0]
    assert slope > 0.4
    assert abs(evidence_weight(third, family, rng=np.random.default_rng(0))[0] - 0.3) < 1e-3


def test_between_grid_points_and_noise() -> None:
    heads = flips(2, episodes=40)
    family = coin_family(heads)
    h = np.concatenate([np.zeros((40, 1)), np.cumsum(heads, 1)], 1)
    n = np.arange(11)[None]
    est = xr.DataArray((1 + 0.735 * h) / (2 + 0.735 * n), dims=("episode", "turn"))
    w, lo, hi = evidence_weight(est, family, rng=np.random.default_rng(0))
    assert abs(w - 0.735) < 0.005  # between the grid's 0.73 and 0.74
    rng = np.random.default_rng(3)
    noisy = est + xr.DataArray(rng.normal(0, 0.03, est.shape), dims=("episode", "turn"))
    w, lo, hi = evidence_weight(noisy, family, rng=np.random.default_rng(0))
    assert lo < 0.735 < hi and hi - lo < 0.3 and lo < w < hi


def test_a_model_that_does_not_move_sits_at_the_grid_floor() -> None:
    family = coin_family(flips(4))
    flat = xr.DataArray(np.full((8, 11), 0.6), dims=("episode", "turn"))
    assert evidence_weight(flat, family, rng=np.random.default_rng(0)) == (0.01, 0.01, 0.01)
    empty = flat * np.nan
    assert np.isnan(evidence_weight(empty, family, rng=np.random.default_rng(0))[0])


def test_the_tempered_step_ratio_is_the_exact_formula() -> None:
    """The ratio of the tempered step to the exact one, as the module states it (0.674 at
    S = 0.3 after 3 heads in 5 flips), computed from the coin flip's own oracles."""
    from belieflens.envs.coin_flip.env import next_flip_oracle

    for s, n, h in ((0.3, 5, 3), (0.3, 0, 0), (0.6, 9, 2), (1.7, 4, 4)):
        p, p1 = (next_flip_oracle(1, 1, x, m)[0] for x, m in ((h, n), (h + 1, n + 1)))
        q, q1 = (next_flip_oracle(1, 1, s * x, s * m)[0] for x, m in ((h, n), (h + 1, n + 1)))
        ratio = (q1 - q) / (p1 - p)
        assert ratio == pytest.approx(s * (1 - q) * (2 + n + 1) / ((1 - p) * (2 + s * (n + 1))))
    assert (q1 - q) / (p1 - p) != pytest.approx(1.7 * (2 + n + 1) / (2 + 1.7 * (n + 1)))
