"""Position bias: how far each Latin-square rotation's belief is from the debiased belief.

A rotation's own belief is the softmax of its option log-probs over its ``K`` options,
mapped from positions to outcomes. If the model had no preference for positions, every
rotation would give the same belief and debiasing would change nothing. Two diagnostics:

- ``rotation_tvd``: TVD between each rotation's own belief and the instance's debiased
  belief, per rotation (mean ± SEM over probe instances);
- ``position_excess``: per answer position, the mean of (probability the rotation puts on
  that position − debiased probability of the outcome shown there). A positive value
  means the model favours that slot regardless of what is shown in it.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import (
    INSTANCE_DIMS,
    PRESENT,
    by_instance,
    first_present,
    pool_rotations,
    query_n_outcome,
)
from belieflens.analysis.divergence import tvd_values
from belieflens.analysis.stats import mean_sem
from belieflens.dims import EPISODE, OPTION, OUTCOME, QUERY, ROTATION, TURN
from belieflens.types import DebiasMethod


def _row_bias(
    lp: np.ndarray, shown_all: np.ndarray, present: np.ndarray, k: np.ndarray, q_all: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One instance: each present rotation's TVD to the debiased belief ``q_all`` and each
    position's excess (NaN where a rotation or the instance has a non-finite value)."""
    tvd = np.full(lp.shape[0], np.nan)
    exc = np.full(lp.shape, np.nan)
    kk = int(k)
    q = q_all[:kk]
    if not present.any() or not np.all(np.isfinite(q)):
        return tvd, exc
    for r in np.flatnonzero(present):
        z = lp[r, :kk]
        if not np.all(np.isfinite(z)):
            continue
        own_pos = np.exp(z - z.max())
        own_pos /= own_pos.sum()
        shown = shown_all[r, :kk]
        own = np.zeros(kk)
        own[shown] = own_pos
        tvd[r] = float(tvd_values(own, q))
        for j in range(kk):
            exc[r, j] = float(own_pos[j] - q[shown[j]])
    return tvd, exc


def _stats_over(x: xr.DataArray, dims: list[str]) -> tuple[xr.DataArray, ...]:
    """Mean, SEM and count of the values over ``dims`` (:func:`~.stats.mean_sem`); NaN (the
    plain one) where there is no value."""
    ms = mean_sem(x.stack(_values=dims), "_values")
    return ms["mean"].where(ms["n"] > 0), ms["sem"], ms["n"]


def position_bias(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Per-rotation and per-position bias of the output beliefs.

    Returns ``rotation_tvd_mean``, ``rotation_tvd_sem`` and ``rotation_n`` on dims
    ``(delivery, probe, rotation)`` and ``position_excess_mean``, ``position_excess_sem``
    on ``(delivery, probe, option)`` (positions past a probe's ``K`` are NaN).
    """
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)
    n_out = query_n_outcome(ds)
    n_max = int(n_out.max()) if n_out.size else 0
    rotation = np.asarray(ds[ROTATION].values).astype(np.int64)
    n_rot = int(rotation.max()) + 1 if rotation.size else 0
    n_pos = lp.shape[1]
    grid = by_instance(ds, {
        "logprob": xr.DataArray(lp, dims=(QUERY, OPTION)),
        "outcome": xr.DataArray(np.asarray(ds["outcome"].values).astype(np.int64),
                                dims=(QUERY, OPTION)),
        "n_outcome": xr.DataArray(n_out, dims=QUERY),
    }, fill_value={"outcome": -1, "n_outcome": 0})
    present = grid[PRESENT]
    k = first_present(grid["n_outcome"], present)
    debiased = pool_rotations(grid["logprob"], grid["outcome"], present, k,
                              method=method, n_max=n_max)
    tvd, exc = xr.apply_ufunc(
        _row_bias, grid["logprob"], grid["outcome"], present, k, debiased,
        input_core_dims=[[ROTATION, OPTION], [ROTATION, OPTION], [ROTATION], [], [OUTCOME]],
        output_core_dims=[[ROTATION], [ROTATION, OPTION]],
        vectorize=True, output_dtypes=[np.float64, np.float64],
    )
    every = xr.DataArray(np.arange(n_rot), dims=ROTATION)
    tvd = tvd.reindex({ROTATION: every}).transpose(*INSTANCE_DIMS, ROTATION)
    rm, rs, rn = _stats_over(tvd, [EPISODE, TURN])
    pm, ps, _ = _stats_over(exc.transpose(*INSTANCE_DIMS, ROTATION, OPTION),
                            [EPISODE, TURN, ROTATION])
    dims_r = ("delivery", "probe", ROTATION)
    dims_p = ("delivery", "probe", OPTION)
    return xr.Dataset(
        {
            "rotation_tvd_mean": rm.transpose(*dims_r),
            "rotation_tvd_sem": rs.transpose(*dims_r),
            "rotation_n": rn.fillna(0).astype(np.int64).transpose(*dims_r),
            "position_excess_mean": pm.transpose(*dims_p),
            "position_excess_sem": ps.transpose(*dims_p),
        },
        coords={ROTATION: np.arange(n_rot), OPTION: np.arange(n_pos)},
        attrs={"debias": method},
    )
