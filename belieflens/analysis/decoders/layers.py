"""Decoder scores per layer over a cache file's ``resid``, against a shuffled control task."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from belieflens.analysis.decoders.folds import group_folds, shuffle_by_group
from belieflens.analysis.decoders.provenance import DecoderKind
from belieflens.analysis.decoders.ridge import DEFAULT_LAMBDAS, RidgeFitter
from belieflens.analysis.decoders.softmax import SoftmaxCV, cross_validate_softmax
from belieflens.dims import D_MODEL, EPISODE, LAYER, OUTCOME, QUERY

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


Reader = Callable[[int, int, list[int]], tuple[F64, NDArray[np.bool_]]]
"""Reads queries ``[a, b)`` of the given layers: ``(block [query, layer, d_model], valid)``."""


def _chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for a in range(0, n, size):
        yield a, min(n, a + size)


def decoder_layers(resid: xr.Dataset | xr.DataArray, target: xr.DataArray, rng: np.random.Generator,
                   *, kind: DecoderKind | None = None, group: str = EPISODE, n_folds: int = 5,
                   folds: ArrayLike | None = None, lam: float | None = None,
                   lambdas: Sequence[float] = DEFAULT_LAMBDAS, nested: bool = True,
                   softmax_lam: float = 1e-3, max_iter: int = 500,
                   layers: Sequence[int] | None = None, chunk_size: int | None = None,
                   memory_budget: int = 2**30) -> xr.Dataset:
    """Held-out decoder scores per layer, against a control task, from residuals over ``query``.

    ``resid`` is a Dataset with variable ``resid`` or the DataArray itself, dims
    ``query, layer, d_model`` (lazy or dask-backed is fine: it is read ``chunk_size``
    queries at a time). ``target`` has dims ``(query,)`` (ridge: a scalar such as a
    posterior mean) or ``(query, outcome)`` (softmax: a distribution such as
    ``oracle``); ``kind`` overrides that choice. Rows whose target has a NaN are
    dropped. Groups for CV are the ``group`` coordinate on ``query`` (of ``resid`` or
    ``target``); ``folds`` overrides the seeded fold assignment. Control targets are
    the targets shuffled across episodes (:func:`shuffle_by_group`), seeded by ``rng``.

    Returns a Dataset over ``layer`` with ``score``, ``control_score`` and
    ``selectivity`` (attrs ``metric`` and ``higher_is_better``); ridge adds ``lam``,
    softmax adds ``tvd`` and ``control_tvd``. Ridge scores are held-out R² (mean over
    outputs); softmax scores are mean held-out KL(target ‖ decoder) in nats, and
    selectivity is then control − score.
    """
    da = _resid_array(resid)
    n_query = da.sizes[QUERY]
    _check_target(target, n_query)
    groups_all = _groups(da, target, group)
    tv = target.transpose(QUERY, ...).values.astype(np.float64).reshape(n_query, -1)
    kind = kind or ("ridge" if target.ndim == 1 else "softmax")
    valid = np.all(np.isfinite(tv), axis=1)
    if not valid.any():
        raise ValueError("every target row has a NaN")
    fold_all, n_folds = _fold_ids(folds, valid, groups_all, n_folds, rng)
    y_ctrl = np.full_like(tv, np.nan)
    y_ctrl[valid] = shuffle_by_group(tv[valid], groups_all[valid], rng)

    layer_idx = list(range(da.sizes[LAYER])) if layers is None else [int(i) for i in layers]
    d = da.sizes[D_MODEL]
    if chunk_size is None:
        chunk_size = max(1, min(n_query, (64 * 2**20) // max(1, len(layer_idx) * d * 8)))
    data = _Data(_reader(da, valid), n_query, chunk_size, layer_idx, tv, y_ctrl, fold_all,
                 n_folds, memory_budget, d)
    if kind == "ridge":
        per_layer = _ridge_layers(data, lam, lambdas, nested)
    else:
        per_layer = _softmax_layers(data, softmax_lam, max_iter)
    out = xr.Dataset(
        {name: ((LAYER,), np.asarray(vals)) for name, vals in per_layer.items()},
        coords={LAYER: _layer_coord(da, layer_idx)},
    )
    out.attrs.update({"decoder": kind, "metric": "r2" if kind == "ridge" else "kl",
                      "higher_is_better": int(kind == "ridge"), "n_folds": n_folds,
                      "n_rows": int(valid.sum()), "group": group,
                      "target": str(target.name) if target.name is not None else "target"})
    return out


def _reader(da: xr.DataArray, valid: NDArray[np.bool_]) -> Reader:
    """Reads queries ``[a, b)`` of the given layers (float64) with their valid-row mask."""

    def read(a: int, b: int, idx: list[int]) -> tuple[F64, NDArray[np.bool_]]:
        block = da.isel({QUERY: slice(a, b), LAYER: idx}).values
        return np.asarray(block, dtype=np.float64), valid[a:b]

    return read


def _layer_coord(da: xr.DataArray, layer_idx: list[int]) -> np.ndarray:
    """The ``layer`` coordinate of the layers read (their indices when ``da`` has none)."""
    if LAYER in da.coords:
        return np.asarray(da.coords[LAYER].values)[layer_idx]
    return np.array(layer_idx)


def _resid_array(resid: xr.Dataset | xr.DataArray) -> xr.DataArray:
    """The residuals as a DataArray ``(query, layer, d_model)``, or raise naming the dims."""
    da = resid["resid"] if isinstance(resid, xr.Dataset) else resid
    for dim in (QUERY, LAYER, D_MODEL):
        if dim not in da.dims:
            raise ValueError(f"resid needs dims ({QUERY}, {LAYER}, {D_MODEL}); got {da.dims}")
    return da.transpose(QUERY, LAYER, D_MODEL)


def _check_target(target: xr.DataArray, n_query: int) -> None:
    if QUERY not in target.dims:
        raise ValueError(f"target needs a {QUERY!r} dimension; got {target.dims}")
    if target.sizes[QUERY] != n_query:
        raise ValueError(f"target has {target.sizes[QUERY]} queries, resid has {n_query}")


def _groups(da: xr.DataArray, target: xr.DataArray, group: str) -> np.ndarray:
    """The ``group`` coordinate on ``query``, of the residuals or else of the target."""
    if group in da.coords:
        return np.asarray(da.coords[group].values)
    if group in target.coords:
        return np.asarray(target.coords[group].values)
    raise ValueError(f"need a {group!r} coordinate on {QUERY!r} to group the folds")


def _fold_ids(
    folds: ArrayLike | None, valid: NDArray[np.bool_], groups: np.ndarray, n_folds: int,
    rng: np.random.Generator,
) -> tuple[I64, int]:
    """Each row's fold (-1: dropped) and the fold count: ``folds`` as given, else seeded."""
    if folds is not None:
        fold_all = np.asarray(folds, dtype=np.int64).ravel()
        return fold_all, int(fold_all[valid].max()) + 1
    fold_all = np.full(len(valid), -1, dtype=np.int64)
    fold_all[valid] = group_folds(groups[valid], n_folds, rng)
    return fold_all, n_folds


@dataclass(frozen=True)
class _Data:
    """What both decoders read: the residual reader, its layout, targets, controls and folds."""

    read: Reader
    n_query: int
    chunk_size: int
    layer_idx: list[int]
    y: F64
    y_ctrl: F64
    folds: I64
    n_folds: int
    memory_budget: int
    d: int


def _ridge_layers(
    data: _Data, lam: float | None, lambdas: Sequence[float], nested: bool
) -> dict[str, list[float]]:
    read, folds, n_folds, d = data.read, data.folds, data.n_folds, data.d
    t = data.y.shape[1]
    y_both = np.concatenate([data.y, data.y_ctrl], axis=1)
    per_pass = max(1, data.memory_budget // max(1, n_folds * d * d * 8))
    res: dict[str, list[float]] = {"score": [], "control_score": [], "selectivity": [], "lam": []}
    for start in range(0, len(data.layer_idx), per_pass):
        group = data.layer_idx[start : start + per_pass]
        fitters = [RidgeFitter(n_folds) for _ in group]
        for a, b in _chunks(data.n_query, data.chunk_size):
            block, ok = read(a, b, group)
            if not ok.any():
                continue
            f, yb = folds[a:b][ok], y_both[a:b][ok]
            for i, fitter in enumerate(fitters):
                fitter.update(block[ok, i, :], yb, f)
        for fitter in fitters:
            cv = fitter.cross_validate(lam, lambdas, nested=nested)
            score, ctrl = float(np.mean(cv.r2[:t])), float(np.mean(cv.r2[t:]))
            chosen = lam if lam is not None else float(np.median(fitter.choose_lambda(lambdas)[:t]))
            res["score"].append(score)
            res["control_score"].append(ctrl)
            res["selectivity"].append(score - ctrl)
            res["lam"].append(chosen)
    return res


def _softmax_layers(data: _Data, lam: float, max_iter: int) -> dict[str, list[float]]:
    read, folds, n_folds, n_query, chunk_size = (
        data.read, data.folds, data.n_folds, data.n_query, data.chunk_size)
    n_valid = int(np.sum(folds >= 0))
    per_pass = data.memory_budget // max(1, n_valid * data.d * 8)
    res: dict[str, list[float]] = {
        "score": [],
        "control_score": [],
        "selectivity": [],
        "tvd": [],
        "control_tvd": [],
    }
    y_both = np.stack([data.y, data.y_ctrl])  # [2, n, k]

    def record(cv: SoftmaxCV) -> None:
        res["score"].append(float(cv.kl[0]))
        res["control_score"].append(float(cv.kl[1]))
        res["selectivity"].append(float(cv.kl[1] - cv.kl[0]))
        res["tvd"].append(float(cv.tvd[0]))
        res["control_tvd"].append(float(cv.tvd[1]))

    if per_pass >= 1:  # load a group of layers into memory, one read of the file per group
        for start in range(0, len(data.layer_idx), per_pass):
            group = data.layer_idx[start : start + per_pass]
            parts, rows = [], []
            for a, b in _chunks(n_query, chunk_size):
                block, ok = read(a, b, group)
                parts.append(block[ok])
                rows.append(np.arange(a, b)[ok])
            x_all = np.concatenate(parts)
            r = np.concatenate(rows)
            y_r, f_r = y_both[:, r], folds[r]
            for i in range(len(group)):
                x_layer = np.ascontiguousarray(x_all[:, i, :])

                def mem_batches(x_i: F64 = x_layer) -> Iterator[tuple[F64, F64, I64]]:
                    yield x_i, y_r, f_r  # noqa: B023 - consumed before the next iteration

                record(cross_validate_softmax(mem_batches, n_folds, lam, max_iter=max_iter))
        return res
    for li in data.layer_idx:  # one layer does not fit: stream it on every pass

        def stream(li: int = li) -> Iterator[tuple[F64, F64, I64]]:
            for a, b in _chunks(n_query, chunk_size):
                block, ok = read(a, b, [li])
                if ok.any():
                    yield block[ok, 0, :], y_both[:, a:b][:, ok], folds[a:b][ok]

        record(cross_validate_softmax(stream, n_folds, lam, max_iter=max_iter))
    return res


def decoder_layers_array(
    resid: ArrayLike,
    target: ArrayLike,
    groups: ArrayLike,
    rng: np.random.Generator,
    **kwargs: Any,
) -> xr.Dataset:
    """:func:`decoder_layers` on numpy arrays: ``resid [query, layer, d_model]`` or
    ``[query, d_model]`` (one layer), ``target [query]`` or ``[query, outcome]``,
    ``groups [query]`` (episode ids). Keyword arguments are passed through."""
    r = np.asarray(resid)
    if r.ndim == 2:
        r = r[:, None, :]
    t = np.asarray(target, dtype=np.float64)
    da = xr.DataArray(
        r,
        dims=(QUERY, LAYER, D_MODEL),
        coords={EPISODE: (QUERY, np.asarray(groups).ravel()), LAYER: np.arange(r.shape[1])},
        name="resid",
    )
    tda = xr.DataArray(t, dims=(QUERY,) if t.ndim == 1 else (QUERY, OUTCOME), name="target")
    return decoder_layers(da, tda, rng, **kwargs)
