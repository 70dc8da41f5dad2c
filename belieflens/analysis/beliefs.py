"""Debiased beliefs from a cache file, arranged on named dimensions.

A *probe instance* is one probe asked at one turn of one episode under one
delivery; its read-outs are its Latin-square rotations (rows of ``query``).
:func:`output_beliefs` pools the rotations (see :func:`belieflens.probes.debias`)
and returns a Dataset with dims ``(delivery, probe, episode, turn, outcome)``;
probes with fewer outcomes than the widest one are padded with NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from belieflens.errors import CacheFileError
from belieflens.probes.latin import debias
from belieflens.types import DebiasMethod


@dataclass(frozen=True)
class Instances:
    """The grouping of a cache file's queries into probe instances."""

    deliveries: tuple[str, ...]
    probes: tuple[str, ...]
    episodes: tuple[int, ...]
    turns: tuple[int, ...]
    index: np.ndarray  # [instance, 4]: positions in the four coordinate tuples
    rows: tuple[np.ndarray, ...]  # query rows of each instance, sorted by rotation
    n_outcome: np.ndarray  # [instance]
    n_outcome_max: int


def instances(ds: xr.Dataset) -> Instances:
    """Group queries into probe instances (delivery, probe, episode, turn)."""
    deliv = np.asarray(ds["delivery"].values).astype(str)
    probe = np.asarray(ds["probe"].values).astype(str)
    episode = np.asarray(ds["episode"].values).astype(np.int64)
    turn = np.asarray(ds["turn"].values).astype(np.int64)
    rotation = np.asarray(ds["rotation"].values).astype(np.int64)
    n_out = (
        np.asarray(ds["n_outcome"].values).astype(np.int64)
        if "n_outcome" in ds
        else (np.asarray(ds["outcome_label"].values).astype(str) != "").sum(axis=1)
    )
    u_d, i_d = np.unique(deliv, return_inverse=True)
    u_p, i_p = np.unique(probe, return_inverse=True)
    u_e, i_e = np.unique(episode, return_inverse=True)
    u_t, i_t = np.unique(turn, return_inverse=True)
    keys = np.stack([i_d, i_p, i_e, i_t], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.lexsort((rotation, inverse))
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    rows = tuple(order[bounds[i] : bounds[i + 1]] for i in range(len(uniq)))
    return Instances(
        deliveries=tuple(str(x) for x in u_d),
        probes=tuple(str(x) for x in u_p),
        episodes=tuple(int(x) for x in u_e),
        turns=tuple(int(x) for x in u_t),
        index=uniq,
        rows=rows,
        n_outcome=np.array([n_out[r[0]] for r in rows], dtype=np.int64),
        n_outcome_max=int(n_out.max()) if len(n_out) else 0,
    )


def _grid(inst: Instances, extra: dict[str, int]) -> tuple[tuple[int, ...], list[str]]:
    shape = (len(inst.deliveries), len(inst.probes), len(inst.episodes), len(inst.turns),
             *extra.values(), inst.n_outcome_max)
    dims = ["delivery", "probe", "episode", "turn", *extra, "outcome"]
    return shape, dims


def _coords(inst: Instances) -> dict[str, object]:
    return {
        "delivery": list(inst.deliveries),
        "probe": list(inst.probes),
        "episode": list(inst.episodes),
        "turn": list(inst.turns),
    }


def pool(
    inst: Instances,
    logprob: np.ndarray,
    outcome: np.ndarray,
    method: DebiasMethod,
) -> np.ndarray:
    """Debias per instance: ``logprob[query, ..., option]`` -> ``[instance, ..., outcome]``.

    ``outcome[query, option]`` is the outcome shown at each position (-1 = pad).
    """
    extra = logprob.shape[1:-1]
    out = np.full((len(inst.rows), *extra, inst.n_outcome_max), np.nan)
    for i, rows in enumerate(inst.rows):
        k = int(inst.n_outcome[i])
        o = outcome[rows][:, :k]
        lp = np.moveaxis(logprob[rows][..., :k], 0, -2)  # [..., rotation, option]
        if np.any(o < 0) or not np.all(np.isfinite(lp)):
            continue
        out[i, ..., :k] = debias(lp, o, method=method)
    return out


def _scatter(inst: Instances, values: np.ndarray, fill: float = np.nan) -> np.ndarray:
    shape = (len(inst.deliveries), len(inst.probes), len(inst.episodes), len(inst.turns),
             *values.shape[1:])
    grid = np.full(shape, fill)
    d, p, e, t = inst.index.T
    grid[d, p, e, t] = values
    return grid


def output_beliefs(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """The model's debiased output beliefs and the oracle, on named dims.

    Returns variables ``belief`` and ``oracle`` with dims
    ``(delivery, probe, episode, turn, outcome)`` and ``outcome_label`` with dims
    ``(probe, outcome)``.
    """
    for name in ("option_logprob", "outcome", "oracle", "outcome_label"):
        if name not in ds.variables:
            raise CacheFileError(f"cache file lacks {name!r}")
    inst = instances(ds)
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)
    outcome = np.asarray(ds["outcome"].values).astype(np.int64)
    belief = pool(inst, lp, outcome, method)
    oracle_q = np.asarray(ds["oracle"].values, dtype=np.float64)[:, : inst.n_outcome_max]
    oracle = np.stack([oracle_q[r[0]] for r in inst.rows])
    _shape, dims = _grid(inst, {})
    labels_q = np.asarray(ds["outcome_label"].values).astype(str)[:, : inst.n_outcome_max]
    labels = np.full((len(inst.probes), inst.n_outcome_max), "", dtype=object)
    for i, rows in enumerate(inst.rows):
        labels[inst.index[i, 1]] = labels_q[rows[0]]
    out = xr.Dataset(
        {
            "belief": (dims, _scatter(inst, belief)),
            "oracle": (dims, _scatter(inst, oracle)),
            "outcome_label": (("probe", "outcome"), labels.astype(str)),
        },
        coords=_coords(inst),
    )
    out.attrs["debias"] = method
    return out


def point_values(labels: list[str]) -> np.ndarray | None:
    """Numeric value of each outcome label, if all are numbers or ranges ``a to b`` (midpoint)."""
    vals = []
    for lab in labels:
        if lab == "":
            vals.append(np.nan)
            continue
        parts = lab.replace("–", " to ").split(" to ")
        try:
            nums = [float(x) for x in parts]
        except ValueError:
            return None
        vals.append(float(np.mean(nums)))
    return np.array(vals)


def point_estimates(beliefs: xr.Dataset) -> xr.Dataset:
    """Point estimates per probe: E[value] for numeric/range labels, else P(first outcome).

    Returns ``estimate`` and ``oracle_estimate`` with the dims of ``belief`` minus ``outcome``,
    and a ``estimate_kind`` per probe (``mean`` or ``p_first``).
    """
    est = []
    orc = []
    kinds = []
    for probe in beliefs["probe"].values:
        labels = [str(x) for x in beliefs["outcome_label"].sel(probe=probe).values]
        values = point_values(labels)
        b = beliefs["belief"].sel(probe=probe)
        o = beliefs["oracle"].sel(probe=probe)
        if values is None:
            kinds.append("p_first")
            est.append(b.isel(outcome=0))
            orc.append(o.isel(outcome=0))
        else:
            v = xr.DataArray(np.nan_to_num(values), dims="outcome")
            kinds.append("mean")
            est.append((b * v).sum("outcome", skipna=False))
            orc.append((o * v).sum("outcome", skipna=False))
    return xr.Dataset(
        {
            "estimate": xr.concat(est, dim="probe"),
            "oracle_estimate": xr.concat(orc, dim="probe"),
            "estimate_kind": ("probe", kinds),
        }
    )


