"""How a model updates, against the oracle and against a target: the measures the teaching gates
read, as pure functions of debiased beliefs.

On a study's :func:`~belieflens.analysis.beliefs.output_beliefs` (``belief`` and ``oracle``
on ``(delivery, probe, episode, turn, outcome)``) and a target on the same grid (the oracle, or
a tempered posterior: :mod:`belieflens.train.tempered`), :func:`updating` gives per delivery
and belief question:

- ``slope``: the updating slope, Δ model estimate on Δ oracle estimate from turn to turn,
  through the origin (:func:`belieflens.analysis.compare.updating_slope`), with its
  episode-clustered standard error and 95% interval;
- ``tvd_oracle`` and ``tvd_target``: the mean total variation distance of the belief to the
  oracle and to the target;
- ``step_r2``: how well the model's turn-to-turn steps match the target's exact steps,
  ``1 − Σ(Δmodel − Δtarget)² / Σ(Δtarget − mean Δtarget)²`` (1: every step the target's; 0: no
  better than the target's mean step; below 0: worse). A model that follows only the last flip
  takes steps of the right sign but no accumulation and scores low, where its slope alone can
  look right;
- ``step_slope``: per turn, the slope of the model's steps on the target's (the goodness of
  fit turn by turn);
- ``episodes`` and ``cells``: what the measures rest on.

:func:`leave_out` removes the read-outs whose prompt a model was taught on
(:func:`~belieflens.readouts.render.prompt_key`) before any of this is measured.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import point_estimates
from belieflens.analysis.compare import updating_slope
from belieflens.dims import DELIVERY, EPISODE, OUTCOME, PROBE, TURN
from belieflens.readouts.render import prompt_key

CELL = (DELIVERY, PROBE, EPISODE, TURN)
"""The dims of one debiased belief."""


def leave_out(beliefs: xr.Dataset, ds: xr.Dataset, keys: Collection[str]
              ) -> tuple[xr.Dataset, int, int]:
    """``beliefs`` with every cell NaN whose read-outs include one whose prompt key is in
    ``keys`` (a taught model's :data:`~belieflens.train.teach.PROMPTS`), the number of read-outs
    of ``ds`` dropped and the number kept."""
    prompts = np.asarray(ds["prompt"].values).astype(str)
    taught = np.array([prompt_key(p) in keys for p in prompts], dtype=bool)
    mask = xr.zeros_like(beliefs["belief"].isel({OUTCOME: 0}), dtype=bool)
    index = [{v: i for i, v in enumerate(beliefs[d].values.tolist())} for d in CELL]
    coords = [ds[d].values.tolist() for d in CELL]
    values = mask.transpose(*CELL).values.copy()
    for q in np.flatnonzero(taught):
        values[tuple(index[k][coords[k][q]] for k in range(len(CELL)))] = True
    dropped = mask.transpose(*CELL).copy(data=values)
    kept = beliefs.copy()
    for name in ("belief", "oracle"):
        kept[name] = beliefs[name].where(~dropped)
    return kept, int(taught.sum()), int((~taught).sum())


def _steps(x: xr.DataArray) -> np.ndarray:
    return np.diff(np.asarray(x.transpose(EPISODE, TURN).values, dtype=np.float64), axis=1)


def step_fit(estimate: xr.DataArray, target: xr.DataArray) -> tuple[float, np.ndarray]:
    """``(step_r2, step_slope per turn)`` of a model's point estimates against a target's
    (dims ``episode`` and ``turn``); ``step_slope[t]`` is the slope through the origin of the
    model's steps into turn ``t`` on the target's (NaN at turn 0 and where undefined)."""
    dm, dt = _steps(estimate), _steps(target)
    ok = np.isfinite(dm) & np.isfinite(dt)
    if ok.sum() < 2:
        return np.nan, np.full(dm.shape[1] + 1, np.nan)
    resid = float(((dm - dt)[ok] ** 2).sum())
    spread = float(((dt[ok] - dt[ok].mean()) ** 2).sum())
    r2 = 1.0 - resid / spread if spread > 0 else np.nan
    slopes = np.full(dm.shape[1] + 1, np.nan)
    for t in range(dm.shape[1]):
        col = ok[:, t]
        sxx = float((dt[col, t] ** 2).sum())
        if col.sum() >= 2 and sxx > 0:
            slopes[t + 1] = float((dm[col, t] * dt[col, t]).sum()) / sxx
    return r2, slopes


def _tvd(a: xr.DataArray, b: xr.DataArray) -> xr.DataArray:
    return 0.5 * abs(a - b).sum(OUTCOME, skipna=False)


def updating(beliefs: xr.Dataset, target: xr.DataArray) -> xr.Dataset:
    """The measures of the module docstring per ``(delivery, probe)`` (``step_slope`` also per
    ``turn``), from ``beliefs`` and ``target`` (the target distribution on ``beliefs``' grid)."""
    est = point_estimates(beliefs)
    tgt = point_estimates(beliefs.assign(oracle=target))["oracle_estimate"]
    tv_oracle = _tvd(beliefs["belief"], beliefs["oracle"])
    tv_target = _tvd(beliefs["belief"], target)
    deliveries, probes = beliefs[DELIVERY].values, beliefs[PROBE].values
    turns = beliefs.sizes[TURN]
    names = ("slope", "slope_se", "tvd_oracle", "tvd_target", "step_r2", "episodes", "cells")
    out = {k: np.full((len(deliveries), len(probes)), np.nan) for k in names}
    per_turn = np.full((len(deliveries), len(probes), turns), np.nan)
    for i, d in enumerate(deliveries):
        for j, p in enumerate(probes):
            sel = {DELIVERY: d, PROBE: p}
            slope, se, _ = updating_slope(est["estimate"].sel(sel),
                                          est["oracle_estimate"].sel(sel))
            r2, per_turn[i, j] = step_fit(est["estimate"].sel(sel), tgt.sel(sel))
            seen = np.isfinite(tv_oracle.sel(sel).transpose(EPISODE, TURN).values)
            for k, v in (("slope", slope), ("slope_se", se), ("step_r2", r2),
                         ("tvd_oracle", float(tv_oracle.sel(sel).mean())),
                         ("tvd_target", float(tv_target.sel(sel).mean())),
                         ("episodes", float(seen.any(axis=1).sum())),
                         ("cells", float(seen.sum()))):
                out[k][i, j] = v
    dims = (DELIVERY, PROBE)
    ds = xr.Dataset({k: (dims, v) for k, v in out.items()},
                    coords={DELIVERY: deliveries, PROBE: probes})
    ds["slope_lo"] = ds["slope"] - 1.96 * ds["slope_se"]
    ds["slope_hi"] = ds["slope"] + 1.96 * ds["slope_se"]
    ds["step_slope"] = ((*dims, TURN), per_turn)
    return ds.assign_coords({TURN: np.arange(turns)})


__all__ = ["CELL", "leave_out", "step_fit", "updating"]
