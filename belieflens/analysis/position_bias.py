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

from belieflens.analysis.beliefs import instances, pool
from belieflens.types import DebiasMethod


def position_bias(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Per-rotation and per-position bias of the output beliefs.

    Returns ``rotation_tvd_mean``, ``rotation_tvd_sem`` and ``rotation_n`` on dims
    ``(delivery, probe, rotation)`` and ``position_excess_mean``, ``position_excess_sem``
    on ``(delivery, probe, option)`` (positions past a probe's ``K`` are NaN).
    """
    inst = instances(ds)
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)
    outcome = np.asarray(ds["outcome"].values).astype(np.int64)
    rotation = np.asarray(ds["rotation"].values).astype(np.int64)
    debiased = pool(inst, lp, outcome, method)  # [instance, outcome]
    n_rot = int(rotation.max()) + 1 if rotation.size else 0
    n_pos = lp.shape[1]
    nd, npb = len(inst.deliveries), len(inst.probes)
    tvd_vals: list[list[list[float]]] = [[[] for _ in range(n_rot)] for _ in range(nd * npb)]
    exc_vals: list[list[list[float]]] = [[[] for _ in range(n_pos)] for _ in range(nd * npb)]
    for i, rows in enumerate(inst.rows):
        k = int(inst.n_outcome[i])
        q = debiased[i, :k]
        if not np.all(np.isfinite(q)):
            continue
        cell = int(inst.index[i, 0]) * npb + int(inst.index[i, 1])
        for r in rows:
            z = lp[r, :k]
            if not np.all(np.isfinite(z)):
                continue
            own_pos = np.exp(z - z.max())
            own_pos /= own_pos.sum()
            shown = outcome[r, :k]
            own = np.zeros(k)
            own[shown] = own_pos
            tvd_vals[cell][rotation[r]].append(0.5 * float(np.abs(own - q).sum()))
            for j in range(k):
                exc_vals[cell][j].append(float(own_pos[j] - q[shown[j]]))

    def stats(vals: list[list[list[float]]], width: int) -> tuple[np.ndarray, ...]:
        mean = np.full((nd, npb, width), np.nan)
        sem = np.full_like(mean, np.nan)
        n = np.zeros((nd, npb, width), dtype=np.int64)
        for c, per in enumerate(vals):
            for j, v in enumerate(per):
                if not v:
                    continue
                a = np.asarray(v)
                mean[c // npb, c % npb, j] = a.mean()
                n[c // npb, c % npb, j] = a.size
                if a.size > 1:
                    sem[c // npb, c % npb, j] = a.std(ddof=1) / np.sqrt(a.size)
        return mean, sem, n

    rm, rs, rn = stats(tvd_vals, n_rot)
    pm, ps, _ = stats(exc_vals, n_pos)
    coords = {"delivery": list(inst.deliveries), "probe": list(inst.probes)}
    dims_r = ("delivery", "probe", "rotation")
    dims_p = ("delivery", "probe", "option")
    return xr.Dataset(
        {
            "rotation_tvd_mean": (dims_r, rm),
            "rotation_tvd_sem": (dims_r, rs),
            "rotation_n": (dims_r, rn),
            "position_excess_mean": (dims_p, pm),
            "position_excess_sem": (dims_p, ps),
        },
        coords={**coords, "rotation": np.arange(n_rot), "option": np.arange(n_pos)},
        attrs={"debias": method},
    )


def format_position_bias(table: xr.Dataset) -> str:
    """Plain-text rendering: per probe, TVD of each rotation and the excess of each position."""
    lines: list[str] = []
    for d in table["delivery"].values:
        for p in table["probe"].values:
            sub = table.sel(delivery=d, probe=p)
            if int(sub["rotation_n"].sum()) == 0:
                continue
            rot = "  ".join(
                f"r{int(r)}={float(v):.3f}"
                for r, v in zip(sub["rotation"].values, sub["rotation_tvd_mean"].values,
                                strict=True)
                if np.isfinite(v)
            )
            pos = "  ".join(
                f"p{int(j)}={float(v):+.3f}"
                for j, v in zip(sub["option"].values, sub["position_excess_mean"].values,
                                strict=True)
                if np.isfinite(v)
            )
            lines.append(f"{d} / {p}: TVD(rotation, debiased) {rot} | position excess {pos}")
    return "\n".join(lines)
