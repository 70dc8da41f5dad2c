"""The evidence weight a model updates with: the strength of the tempered posterior whose
per-turn changes its own match best.

A tempered posterior weights the evidence by a strength ``S`` (on the coin flip
Beta(a0 + S·h, b0 + S·(n − h)); :class:`~belieflens.episodes.capabilities.Temperable`): ``S``
is its evidence weight by construction. The updating slope
(:func:`belieflens.analysis.compare.updating_slope`) of such a posterior is not ``S``: after
``n`` flips, a next flip of the first face moves the exact predictive ``p`` by
``(1 − p) / (a0 + b0 + n + 1)`` and the tempered one ``p_S`` by
``S·(1 − p_S) / (a0 + b0 + S·(n + 1))``, a ratio of
``S·(1 − p_S)·(a0 + b0 + n + 1) / ((1 − p)·(a0 + b0 + S·(n + 1)))`` (0.674 at S = 0.3 after 3
heads in 5 flips from Beta(1, 1)), which is ``S·(a0 + b0 + n + 1) / (a0 + b0 + S·(n + 1))``
only where ``p_S = p``.
:func:`evidence_weight` measures a model on the tempered family itself: the ``S`` whose
changes of point estimate from turn to turn are nearest (least squares over every episode and
turn) to the model's. On a tempered posterior it gives that posterior's ``S``; on a model that
does not move, 0; a constant offset (a model's level bias) does not enter, as in the slope.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.dims import EPISODE, TURN

STRENGTH = "strength"
"""The dimension of a tempered family: the evidence weight of each member."""


def _steps(x: xr.DataArray, *lead: str) -> np.ndarray:
    return np.diff(np.asarray(x.transpose(*lead, EPISODE, TURN).values, dtype=np.float64),
                   axis=-1)


def _argmin(strengths: np.ndarray, sse: np.ndarray) -> np.ndarray:
    """Per row of ``sse [..., strength]``, the minimising strength, refined by the parabola
    through the grid minimum and its two neighbours (the grid's end where it is the min)."""
    i = np.argmin(sse, axis=-1)
    j = np.clip(i, 1, strengths.size - 2)
    y0, y1, y2 = (np.take_along_axis(sse, (j + d)[..., None], -1)[..., 0] for d in (-1, 0, 1))
    h = strengths[j + 1] - strengths[j]
    denom = y0 - 2 * y1 + y2
    shift = np.where(denom > 0, 0.5 * h * (y0 - y2) / np.where(denom > 0, denom, 1.0), 0.0)
    inner = (i > 0) & (i < strengths.size - 1)
    out: np.ndarray = np.where(inner, strengths[j] + np.clip(shift, -h, h), strengths[i])
    return out


def evidence_weight(
    estimate: xr.DataArray, family: xr.DataArray, *, rng: np.random.Generator,
    n_boot: int = 1000, level: float = 0.95,
) -> tuple[float, float, float]:
    """The evidence weight of ``estimate`` and its bootstrap interval over episodes.

    Args:
        estimate: the model's point estimate, dims ``episode`` and ``turn``.
        family: the tempered posteriors' point estimates on the same read-outs, dims
            ``strength`` (a coordinate: the evidence weights, ascending), ``episode`` and
            ``turn``.
        rng: the bootstrap's randomness (episodes resampled with replacement).
        n_boot: bootstrap resamples; level: the interval's coverage.

    Returns:
        ``(S, lo, hi)``: the strength whose turn-to-turn changes are nearest the model's in
        squared error (between grid points by parabolic refinement; the grid's end when the
        best is there), and the percentile interval. Steps with a NaN are left out; all NaN
        when no step is left.
    """
    strengths = np.asarray(family[STRENGTH].values, dtype=np.float64)
    dm = _steps(estimate)
    df = _steps(family, STRENGTH)
    ok = np.isfinite(dm)[None] & np.isfinite(df)
    if not ok.all(axis=0).any() or strengths.size < 3:
        return np.nan, np.nan, np.nan
    err = np.where(ok.all(axis=0)[None], (dm[None] - df) ** 2, 0.0)
    per_episode = err.sum(axis=-1).T  # [episode, strength]
    best = float(_argmin(strengths, per_episode.sum(axis=0)[None])[0])
    n_ep = per_episode.shape[0]
    counts = rng.multinomial(n_ep, np.full(n_ep, 1.0 / n_ep), size=n_boot)
    boot = _argmin(strengths, counts @ per_episode)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(boot, [tail, 100 - tail])
    return best, float(lo), float(hi)
