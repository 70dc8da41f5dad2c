"""Debiased beliefs from a cache file, arranged on named dimensions.

A *probe instance* is one probe asked at one turn of one episode under one
delivery; its read-outs are its Latin-square rotations (rows of ``query``).
:func:`by_instance` reshapes any per-query data with xarray
(``set_index(query=[delivery, probe, episode, turn, rotation]).unstack("query")``), and
:func:`pool_rotations` pools the rotations of every instance with
:func:`belieflens.episodes.latin.debias` (an :func:`xarray.apply_ufunc` over the ``rotation`` and
``option`` dims). :func:`output_beliefs` returns a Dataset with dims
``(delivery, probe, episode, turn, outcome)``; probes with fewer outcomes than the widest
one are padded with NaN. :func:`lens_beliefs` debiases a lens's scores per layer
(:mod:`belieflens.lens.apply`) the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.dims import EPISODE, LAYER, OPTION, OUTCOME, PROBE, QUERY, ROTATION, TURN
from belieflens.episodes.latin import debias
from belieflens.errors import CacheFileError
from belieflens.lens.apply import (
    LENS_BLOCK_BYTES,
    MultiToken,
    has_continuations,
    lens_option_logprob,
)
from belieflens.lens.base import Lens, LogitLens
from belieflens.types import DebiasMethod

DELIVERY = "delivery"
INSTANCE_DIMS: tuple[str, ...] = (DELIVERY, PROBE, EPISODE, TURN)
"""The dims that name a probe instance, in output order."""
KEY_DIMS: tuple[str, ...] = (*INSTANCE_DIMS, ROTATION)
"""The coordinates on ``query`` that :func:`by_instance` unstacks, in this order."""
PRESENT = "present"
"""Boolean variable of :func:`by_instance`: whether a query exists at that grid cell."""


def _keys(ds: xr.Dataset) -> dict[str, np.ndarray]:
    return {
        DELIVERY: np.asarray(ds[DELIVERY].values).astype(str),
        PROBE: np.asarray(ds[PROBE].values).astype(str),
        EPISODE: np.asarray(ds[EPISODE].values).astype(np.int64),
        TURN: np.asarray(ds[TURN].values).astype(np.int64),
        ROTATION: np.asarray(ds[ROTATION].values).astype(np.int64),
    }


def query_n_outcome(ds: xr.Dataset) -> np.ndarray:
    """Outcomes of each query's probe (``n_outcome``, else the non-empty ``outcome_label``s)."""
    if "n_outcome" in ds:
        return np.asarray(ds["n_outcome"].values).astype(np.int64)
    return np.asarray((np.asarray(ds["outcome_label"].values).astype(str) != "").sum(axis=1))


def by_instance(
    ds: xr.Dataset,
    data: Mapping[Hashable, xr.DataArray] | xr.Dataset,
    *,
    fill_value: Mapping[Hashable, Any] | None = None,
) -> xr.Dataset:
    """Per-query ``data`` reshaped onto ``(delivery, probe, episode, turn, rotation, ...)``.

    ``data`` holds variables with a ``query`` dim of the length of ``ds``'s; the query keys
    are ``ds``'s ``delivery, probe, episode, turn, rotation`` coordinates. The reshape is
    xarray's ``set_index(query=[...]).unstack("query")``: coordinates come out sorted, and
    grid cells with no query are filled (NaN unless ``fill_value`` names another value per
    variable). A boolean ``present`` variable marks the cells that hold a query. Two queries
    with the same keys are a :class:`~belieflens.errors.CacheFileError`.
    """
    if ds.sizes.get(QUERY, 0) == 0:
        raise CacheFileError("cache file has no read-outs (query is empty)")
    keys = _keys(ds)
    out = xr.Dataset(dict(data)).assign({PRESENT: (QUERY, np.ones(ds.sizes[QUERY], bool))})
    out = out.assign_coords({k: (QUERY, v) for k, v in keys.items()})
    out = out.set_index({QUERY: list(KEY_DIMS)})  # type: ignore[dict-item]
    index = out.indexes[QUERY]
    if index.has_duplicates:
        raise CacheFileError(
            "cache file has several queries with the same delivery, probe, episode, turn "
            "and rotation"
        )
    fills: dict[Hashable, Any] = {PRESENT: False, **(fill_value or {})}
    grid = out.unstack(QUERY, fill_value=fills)
    grid = grid.assign_coords({
        k: np.asarray(grid[k].values).astype(v.dtype if v.dtype.kind != "U" else str)
        for k, v in keys.items()
    })
    return grid.transpose(*KEY_DIMS, ...)


def first_present(grid: xr.DataArray, present: xr.DataArray) -> xr.DataArray:
    """``grid`` at each instance's lowest present rotation (drops ``rotation``)."""
    return grid.isel({ROTATION: present.argmax(ROTATION)}).drop_vars(ROTATION, errors="ignore")


def _pool_one(
    lp: np.ndarray, outcome: np.ndarray, present: np.ndarray, k: np.ndarray, *,
    method: DebiasMethod, n_max: int,
) -> np.ndarray:
    """One instance: ``lp [..., rotation, option]``, ``outcome [rotation, option]`` ->
    ``[..., n_max]`` (NaN unless every present rotation is finite and fully labelled)."""
    res = np.full((*lp.shape[:-2], n_max), np.nan)
    if not present.any():
        return res
    kk = int(k)
    # rotation first, present rows taken (a C-ordered copy), options cut to k: the layout
    # (and so every rounding) of the per-instance arrays this module has always pooled
    rows = np.moveaxis(np.moveaxis(lp, -2, 0)[present][..., :kk], 0, -2)
    shown = outcome[present][:, :kk]
    if np.any(shown < 0) or not np.all(np.isfinite(rows)):
        return res
    res[..., :kk] = debias(rows, shown.astype(np.int64), method=method)
    return res


def pool_rotations(
    logprob: xr.DataArray,
    outcome: xr.DataArray,
    present: xr.DataArray,
    n_outcome: xr.DataArray,
    *,
    method: DebiasMethod = "geometric",
    n_max: int,
) -> xr.DataArray:
    """Debias every instance over its rotations (an ``apply_ufunc`` of ``debias``).

    ``logprob`` has dims ``(..., rotation, [extra dims], option)``, ``outcome`` and
    ``present`` those of :func:`by_instance` (``outcome`` -1 where a position is padding),
    ``n_outcome`` the instance's ``K`` (no ``rotation`` dim). The present rotations of an
    instance are pooled over its first ``K`` options; the result has the extra dims then
    ``outcome`` (size ``n_max``, NaN past ``K``), and is NaN for an instance with a
    non-finite log-prob or a padding outcome among its first ``K`` positions.
    """
    extra = [d for d in logprob.dims if d not in (*INSTANCE_DIMS, ROTATION, OPTION)]
    fn: Callable[..., np.ndarray] = lambda lp, o, p, k: _pool_one(  # noqa: E731
        lp, o, p, k, method=method, n_max=n_max
    )
    out: xr.DataArray = xr.apply_ufunc(
        fn,
        logprob,
        outcome,
        present,
        n_outcome,
        input_core_dims=[[*extra, ROTATION, OPTION], [ROTATION, OPTION], [ROTATION], []],
        output_core_dims=[[*extra, OUTCOME]],
        vectorize=True,
        output_dtypes=[np.float64],
    )
    return out.transpose(*[d for d in INSTANCE_DIMS if d in out.dims], *extra, OUTCOME)


def instance_logprob(
    ds: xr.Dataset, logprob: np.ndarray | xr.DataArray, *, method: DebiasMethod,
    extra: Sequence[str] = (),
) -> xr.DataArray:
    """Debiased beliefs from per-query ``logprob [query, *extra, option]``.

    Dims ``(delivery, probe, episode, turn, *extra, outcome)``; see :func:`pool_rotations`.
    """
    if isinstance(logprob, xr.DataArray):
        logprob = logprob.transpose(QUERY, *extra, OPTION).values
    lp = xr.DataArray(np.asarray(logprob, dtype=np.float64), dims=(QUERY, *extra, OPTION))
    n_out = query_n_outcome(ds)
    grid = by_instance(ds, {
        "logprob": lp,
        "outcome": xr.DataArray(
            np.asarray(ds["outcome"].values).astype(np.int64), dims=(QUERY, OPTION)
        ),
        "n_outcome": xr.DataArray(n_out, dims=QUERY),
    }, fill_value={"outcome": -1, "n_outcome": 0})
    n_max = int(n_out.max()) if n_out.size else 0
    k = first_present(grid["n_outcome"], grid[PRESENT])
    return pool_rotations(grid["logprob"], grid["outcome"], grid[PRESENT], k,
                          method=method, n_max=n_max)


def output_beliefs(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """The model's debiased output beliefs and the oracle, on named dims.

    Returns variables ``belief`` and ``oracle`` with dims
    ``(delivery, probe, episode, turn, outcome)`` and ``outcome_label`` with dims
    ``(probe, outcome)`` (each probe's labels as its last instance shows them).
    """
    for name in ("option_logprob", "outcome", "oracle", "outcome_label"):
        if name not in ds.variables:
            raise CacheFileError(f"cache file lacks {name!r}")
    n_out = query_n_outcome(ds)
    n_max = int(n_out.max()) if n_out.size else 0
    grid = by_instance(ds, {
        "logprob": xr.DataArray(np.asarray(ds["option_logprob"].values, dtype=np.float64),
                                dims=(QUERY, OPTION)),
        "outcome": xr.DataArray(np.asarray(ds["outcome"].values).astype(np.int64),
                                dims=(QUERY, OPTION)),
        "n_outcome": xr.DataArray(n_out, dims=QUERY),
        "oracle": xr.DataArray(np.asarray(ds["oracle"].values, dtype=np.float64)[:, :n_max],
                               dims=(QUERY, OUTCOME)),
        "outcome_label": xr.DataArray(
            np.asarray(ds["outcome_label"].values).astype(str)[:, :n_max].astype(object),
            dims=(QUERY, OUTCOME)),
    }, fill_value={"outcome": -1, "n_outcome": 0, "outcome_label": ""})
    present = grid[PRESENT]
    first = grid.drop_vars(PRESENT).isel({ROTATION: present.argmax(ROTATION)})
    belief = pool_rotations(grid["logprob"], grid["outcome"], present, first["n_outcome"],
                            method=method, n_max=n_max)
    seen = present.any(ROTATION)
    oracle = first["oracle"].where(seen).transpose(*INSTANCE_DIMS, OUTCOME)
    labels = _probe_labels(first["outcome_label"], seen)
    out = xr.Dataset(
        {"belief": belief, "oracle": oracle, "outcome_label": labels},
    ).drop_vars(ROTATION, errors="ignore")
    out.attrs["debias"] = method
    return out


def _probe_labels(labels: xr.DataArray, seen: xr.DataArray) -> xr.DataArray:
    """Per probe, the labels of its last instance in (delivery, episode, turn) order."""
    flat = labels.transpose(PROBE, DELIVERY, EPISODE, TURN, OUTCOME).values
    mask = seen.transpose(PROBE, DELIVERY, EPISODE, TURN).values
    n_p, n_o = flat.shape[0], flat.shape[-1]
    flat = flat.reshape(n_p, -1, n_o)
    mask = mask.reshape(n_p, -1)
    out = np.full((n_p, n_o), "", dtype=object)
    for p in range(n_p):
        hit = np.flatnonzero(mask[p])
        if hit.size:
            out[p] = flat[p, hit[-1]]
    return xr.DataArray(out.astype(str), dims=(PROBE, OUTCOME),
                        coords={PROBE: labels[PROBE].values})


def point_values(labels: Sequence[str]) -> NDArray[np.float64] | None:
    """Numeric value of each outcome label (a number, or a range ``a to b``: its midpoint),
    or ``None`` if some non-empty label is not numeric. Empty labels (padding) are NaN."""
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
    return np.asarray(vals, dtype=np.float64)


def belief_mean(p: NDArray[np.float64], labels: Sequence[str]) -> NDArray[np.float64]:
    """The point estimate of distributions ``p [..., outcome]`` over outcomes with ``labels``:
    E[value] for numeric or range labels, else the probability of the first outcome."""
    values = point_values(labels)
    if values is None:
        return np.asarray(p[..., 0], dtype=np.float64)
    k = p.shape[-1]
    return np.asarray(np.sum(p * np.nan_to_num(values[:k]), axis=-1), dtype=np.float64)


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


LAYER_BLOCK_BYTES = 2**22
"""Bytes of ``[query, layer, option]`` log-scores normalised and pooled at a time."""


def _log_normalise_options(logp: np.ndarray) -> np.ndarray:
    """Log-softmax over the last axis (options), NaN scores as impossible options."""
    z = np.where(np.isnan(logp), -np.inf, logp)
    m = np.max(z, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    z -= m
    z -= np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
    return z


def lens_beliefs(
    ds: xr.Dataset,
    *,
    method: DebiasMethod = "geometric",
    lens: Lens | None = None,
    multi_token: MultiToken = "auto",
    chunk: int = 256,
) -> xr.DataArray:
    """Debiased lens beliefs (the logit lens by default, or any
    :class:`~belieflens.lens.Lens`), scored by :func:`~belieflens.lens.apply.lens_option_logprob`.

    Dims: ``(delivery, probe, episode, turn, layer, outcome)``; attrs record the lens and
    whether multi-token options were scored whole (``multi_token``).
    """
    use = LogitLens() if lens is None else lens
    logp = lens_option_logprob(ds, chunk=chunk, lens=use, multi_token=multi_token,
                               memory_budget=LENS_BLOCK_BYTES).values
    n_layer = logp.shape[1]
    step = max(1, LAYER_BLOCK_BYTES // max(1, logp[:, :1].nbytes))
    # normalised and pooled a few layers at a time: the rotation grid and the pooling's
    # temporaries are then a block's, not the whole [query, layer, option] array's copies
    parts = [instance_logprob(ds, _log_normalise_options(logp[:, a:a + step]), method=method,
                              extra=(LAYER,))
             for a in range(0, n_layer, step)]
    pooled = parts[0] if len(parts) == 1 else xr.concat(parts, dim=LAYER)
    whole = multi_token == "auto" and has_continuations(ds)
    out = pooled.assign_coords({LAYER: list(range(ds.sizes["layer"]))})
    out.name = "lens_belief"
    out.attrs = {
        "lens": use.name.removesuffix("-lens"),
        "multi_token": "continuation" if whole else "first-token",
        "debias": method,
    }
    return out
