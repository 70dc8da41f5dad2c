"""The floor comparison's statistics on simulated read-outs: the interval covers episodes and
seeds and holds across layers (max-T), so a study that is one more untrained network is
rarely flagged anywhere, while the per-layer episode bootstrap flags it nearly always; a
large difference is found; a statistic baseline's comparison is the episode bootstrap
alone."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from belieflens.analysis.floor import min_episodes
from belieflens.analysis.floor_test import (
    beyond_floor,
    beyond_value,
    max_t,
    min_bootstrap_episodes,
    seed_draws,
)

F64 = NDArray[np.float64]
LAYERS, EPISODES, CONTROLS, BOOT = 16, 24, 3, 400


def _study(rng: np.random.Generator, effect: float = 0.0
           ) -> tuple[F64, F64, F64, F64]:
    """One simulated study: a seed effect per network and layer, an effect per episode that
    every network shares and noise per network and episode; the study (network 0) raised by
    ``effect`` seed SDs at layers 4..11."""
    seeds = rng.standard_normal((CONTROLS + 1, LAYERS))
    seeds[0, 4:12] += effect
    shared = rng.standard_normal((EPISODES, LAYERS))
    values = seeds[:, None, :] + shared[None] + 0.5 * rng.standard_normal(
        (CONTROLS + 1, EPISODES, LAYERS))
    w = rng.multinomial(EPISODES, np.full(EPISODES, 1 / EPISODES), size=BOOT) / EPISODES
    full, boot = values.mean(axis=1), np.einsum("be,fel->fbl", w, values)
    return full[0], boot[0], full[1:], boot[1:]


def test_a_null_study_is_rarely_flagged_where_the_episode_bootstrap_flags_it_nearly_always(
) -> None:
    rng = np.random.default_rng(0)
    shipped, naive = [], []
    for _ in range(40):
        t, tb, c, cb = _study(rng)
        shipped.append(bool(beyond_floor(t, tb, c, cb, rng, sign=1.0).exceeds.any()))
        boot = tb - cb.mean(axis=0)
        naive.append(bool((np.percentile(boot, 2.5, axis=0) > 0).any()))
    assert sum(shipped) <= 2  # family-wise: at most 5% of studies, here 0 or 1 of 40
    assert sum(naive) >= 30  # seeds differ: the episodes alone flag nearly every study


def test_a_large_difference_is_found_and_the_sign_follows_the_metric() -> None:
    rng = np.random.default_rng(1)
    t, tb, c, cb = _study(rng, effect=60.0)
    up = beyond_floor(t, tb, c, cb, rng, sign=1.0)
    assert up.exceeds[4:12].all() and not up.exceeds[12:].any()
    assert np.allclose(up.selectivity, t - c.mean(axis=0))
    assert bool((up.low <= up.selectivity).all() and (up.selectivity <= up.high).all())
    down = beyond_floor(-t, -tb, -c, -cb, rng, sign=-1.0)  # a TVD: lower is better
    assert np.allclose(down.selectivity, up.selectivity)
    assert down.exceeds[4:12].all()


def test_the_correction_widens_the_interval_beyond_one_layers() -> None:
    rng = np.random.default_rng(2)
    dev = rng.standard_normal((4000, LAYERS))
    one = max_t(np.zeros(1), dev[:, :1], np.ones(1))
    many = max_t(np.zeros(LAYERS), dev, np.ones(LAYERS))
    assert one.critical == pytest.approx(1.96, abs=0.1)
    assert many.critical > one.critical + 0.5  # the largest of 16 deviations
    flat = max_t(np.array([0.5, 0.0]), np.zeros((10, 2)), np.zeros(2))  # no noise anywhere
    assert np.isnan(flat.critical) and flat.low.tolist() == [0.5, 0.0]


def test_a_baseline_comparison_has_no_seeds_part() -> None:
    rng = np.random.default_rng(3)
    t, tb, c, cb = _study(rng)
    base, base_b = c[0], cb[0]
    b = beyond_value(t, tb, base, base_b, sign=1.0)
    assert np.allclose(b.selectivity, t - base)
    assert np.allclose(b.se, (tb - base_b - (t - base)).std(axis=0))


def test_the_seeds_part_needs_two_controls_and_scales_with_their_spread() -> None:
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError, match="at least 2 controls"):
        seed_draws(np.zeros((1, 3)), 10, rng)
    c = np.array([[0.0, 0.0], [1.0, 10.0], [2.0, 20.0]])
    draws = seed_draws(c, 20000, rng)
    ratio = np.median(np.abs(draws[:, 1])) / np.median(np.abs(draws[:, 0]))
    assert ratio == pytest.approx(10.0, rel=0.1)


def test_the_fewest_episodes() -> None:
    assert min_bootstrap_episodes(1000) == 7 and min_bootstrap_episodes(100) == 5
    assert min_episodes(1000) == 7 and min_episodes(10, geometry=True) == 5
    assert min_episodes(10, geometry=False) == 3
