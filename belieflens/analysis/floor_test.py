"""The statistics of a floor comparison: intervals that cover episodes and seeds, corrected
across layers.

A read-out's **selectivity** at each layer is how far the trained value lies beyond a
reference, signed so that positive is better. Its interval has to cover two kinds of noise:

- **episodes**: the files share their episodes, so a bootstrap replicate resamples episodes
  with replacement and takes the same resample in every file (paired);
- **seeds** (against untrained controls only): the trained network is one network, the floor
  the mean of ``C`` untrained ones. If the trained network were one more untrained network,
  its distance from the floor's mean would vary from seed to seed by the controls' spread
  ``s`` (their standard deviation per layer) times ``sqrt(1 + 1/C)``, and with few seeds
  ``s`` itself is uncertain: Student's t with ``C - 1`` degrees of freedom (the predictive
  distribution of one more seed). Each replicate adds one such draw per layer to the
  episode bootstrap's deviation. The draws are independent across layers: how a seed's
  deviation at one layer goes with its deviation at another cannot be estimated from a few
  seeds, and independent draws make the maximum below larger (conservative).

Against a statistic baseline (a fit on the same file's episodes) only the episode part
applies.

**Correction across layers** (family-wise, max-T over the bootstrap): each replicate's
deviation per layer is divided by that layer's scale ``se`` (the root of the episode
bootstrap's variance plus ``s² (1 + 1/C)``), and the critical value ``crit`` is the
``level`` quantile of the largest absolute scaled deviation over the layers. The interval
``selectivity ± crit · se`` then holds at every layer at once with probability ``level``, and a
layer is **beyond** its reference where the interval's low end is above 0
(:data:`TOLERANCE`): across all layers together, the chance of flagging any layer where the
trained network is no better than its reference is at most ``1 - level``.

``bench/floor_null.py`` measures, on simulated read-outs, how often each way of drawing the
interval flags a layer when nothing differs, and how large a difference it finds.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]

LEVEL = 0.95
"""The intervals' coverage, jointly over the layers of a read-out."""

TOLERANCE = 1e-6
"""How far above 0 an interval's low end must be for a layer to be beyond its reference: a
read-out that any embedding gives alike (layer 0 of a token model) differs from its floor
only by rounding."""

SEED_DRAWS = 10
"""Draws of one more seed's deviation beside each bootstrap replicate of the episodes: the
seeds' part is heavy-tailed with few controls, and its quantile steadier over more draws."""

MIN_CONTROLS = 2
"""Untrained controls a floor needs: their spread is the seed part of every interval."""

CORRECTION = ("max-T over layers: the interval is the selectivity +- crit * se, crit the "
              "level quantile over bootstrap replicates of the largest |deviation| / se over "
              "layers")
"""The family-wise correction, as the results' attributes name it."""

INTERVAL = ("bootstrap over episodes (the same resample in every file) plus, against "
            "untrained controls, one more seed's deviation per layer: the controls' spread "
            "times sqrt(1 + 1/C), Student's t with C - 1 degrees of freedom")
"""How the intervals are drawn, as the results' attributes name it."""


def min_bootstrap_episodes(n_boot: int) -> int:
    """The fewest episodes whose resamples with replacement number at least ``n_boot``
    distinct ones (``C(2n - 1, n)``): fewer, and a bootstrap of ``n_boot`` replicates repeats
    itself.

    Examples:
        >>> min_bootstrap_episodes(1000), comb(11, 6), comb(13, 7)
        (7, 462, 1716)
    """
    n = 1
    while comb(2 * n - 1, n) < n_boot:
        n += 1
    return n


@dataclass(frozen=True, eq=False)
class Beyond:
    """A selectivity per layer with its corrected interval (module docstring)."""

    selectivity: F64
    """``[layer]``: positive = better than the reference."""
    low: F64
    """``[layer]``: the interval's low end (every layer at once at the level)."""
    high: F64
    """``[layer]``: the interval's high end."""
    se: F64
    """``[layer]``: the scale of the selectivity's noise (episodes, and seeds if any)."""
    critical: float
    """The critical value of the max-T correction (``low = selectivity - critical * se``)."""

    @property
    def exceeds(self) -> NDArray[np.bool_]:
        """Whether each layer is beyond its reference: the interval's low end above 0."""
        with np.errstate(invalid="ignore"):
            return np.asarray(self.low > TOLERANCE)


def seed_draws(controls: F64, n_draws: int, rng: np.random.Generator) -> F64:
    """``[n_draws, layer]``: one more untrained seed's deviation from the mean of the
    ``controls [C, layer]`` (``C`` >= 2): the controls' standard deviation times
    ``sqrt(1 + 1/C)`` times Student's t with ``C - 1`` degrees of freedom, drawn
    independently per layer."""
    c = np.asarray(controls, dtype=np.float64)
    n_c = c.shape[0]
    if n_c < MIN_CONTROLS:
        raise ValueError(f"a seed spread needs at least {MIN_CONTROLS} controls, got {n_c}")
    s = np.std(c, axis=0, ddof=1)
    t = rng.standard_t(n_c - 1, size=(n_draws, c.shape[1]))
    return np.asarray(s * np.sqrt(1.0 + 1.0 / n_c) * t, dtype=np.float64)


def max_t(selectivity: F64, deviations: F64, se: F64, level: float = LEVEL) -> Beyond:
    """The corrected interval of ``selectivity [layer]`` from replicate ``deviations
    [replicate, layer]`` (each replicate's selectivity minus the estimate) scaled by ``se
    [layer]`` (module docstring); a layer without noise (``se`` 0) or without a value is
    left out of the maximum and gets the selectivity itself as its interval."""
    sel = np.asarray(selectivity, dtype=np.float64)
    ok = np.isfinite(sel) & np.isfinite(se) & (se > 0)
    crit = float("nan")
    if ok.any():
        z = np.abs(deviations[:, ok]) / se[ok]
        worst = np.nanmax(np.where(np.isfinite(z), z, -np.inf), axis=1)
        crit = float(np.quantile(worst[np.isfinite(worst)], level))
    half = np.where(ok, crit * np.where(ok, se, 0.0), 0.0)
    return Beyond(selectivity=sel, low=sel - half, high=sel + half,
                  se=np.asarray(se, dtype=np.float64), critical=crit)


def _variance(a: F64) -> F64:
    """The variance over the first axis of the finite values (NaN where there are none)."""
    ok = np.isfinite(a)
    n = ok.sum(axis=0)
    mean = np.where(ok, a, 0.0).sum(axis=0) / np.maximum(n, 1)
    var = (np.where(ok, a - mean, 0.0) ** 2).sum(axis=0) / np.maximum(n, 1)
    return np.asarray(np.where(n > 0, var, np.nan), dtype=np.float64)


def beyond_floor(trained: F64, trained_boot: F64, controls: F64, controls_boot: F64,
                 rng: np.random.Generator, *, sign: float, level: float = LEVEL) -> Beyond:
    """Selectivity against the controls' mean with its corrected interval.

    ``trained [layer]`` and ``controls [C, layer]``: the values on all episodes;
    ``trained_boot [replicate, layer]`` and ``controls_boot [C, replicate, layer]``: on each
    replicate's resample of episodes (the same in every file). ``sign`` is +1 where higher
    is better (R²), -1 where lower is (a TVD)."""
    floor = controls.mean(axis=0)
    sel = sign * (trained - floor)
    with np.errstate(invalid="ignore"):
        episode = sign * (trained_boot - controls_boot.mean(axis=0)) - sel
    n_c = controls.shape[0]
    seed = seed_draws(controls, episode.shape[0] * SEED_DRAWS, rng)
    s2 = np.var(controls, axis=0, ddof=1) * (1.0 + 1.0 / n_c)
    se = np.sqrt(_variance(episode) + s2)
    return max_t(sel, np.repeat(episode, SEED_DRAWS, axis=0) + seed, se, level)


def beyond_value(trained: F64, trained_boot: F64, value: F64, value_boot: F64, *,
                 sign: float, level: float = LEVEL) -> Beyond:
    """Selectivity against a reference fitted on the same episodes (a statistic baseline:
    ``value [layer]`` and ``value_boot [replicate, layer]``, constant over layers or not),
    with its corrected interval: the episode bootstrap alone."""
    sel = sign * (trained - value)
    with np.errstate(invalid="ignore"):
        episode = sign * (trained_boot - value_boot) - sel
    return max_t(sel, episode, np.sqrt(_variance(episode)), level)
