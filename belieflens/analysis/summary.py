"""One tidy table of how far each read-out of the model's belief is from the Bayesian oracle.

:func:`summary` returns TVD to the oracle (mean over episodes ± 1 SEM) on dims
``(delivery, probe, turn, layer, source)`` with ``source`` one of:

- ``output``: the model's debiased output belief. It does not depend on the layer and is
  **repeated over every layer**, so that ``sel(layer=l)`` compares all sources at once
  and a layer x turn heatmap of it is flat by construction.
- ``logit-lens``: each layer's residual at the answer position read through the final
  norm and unembedding (:mod:`belieflens.lens.apply`), debiased like the output.
- ``tuned-lens``: the same after the layer's tuned-lens translator; NaN without a lens.
- ``decoder``: a linear decoder of the oracle distribution fitted per layer and per probe
  question on the residuals at the answer position: the one estimator of every linear
  read-out (:mod:`belieflens.analysis.decoders.estimator`: ridge on standardised features,
  its penalty chosen by nested cross-validation inside each outer fold's training
  episodes), its prediction projected onto the simplex, scored on held-out episodes
  (folds grouped by episode, so no episode's turns are in both train and test); its
  held-out predictions' TVDs are averaged over rotations per probe instance. NaN where no
  oracle exists or fewer than 3 episodes are in the file.

``delivery`` is a dimension of its own because deliveries (single- vs multi-turn) are
different conditions on the same evidence, and pooling them would hide the comparison they
exist for. A file with one delivery has ``delivery`` of size 1 (``.squeeze("delivery")``).

Residuals are read ``chunk`` queries at a time (lens) or in layer groups under a memory
budget (decoders), so files larger than memory work.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import (
    INSTANCE_DIMS,
    PRESENT,
    by_instance,
    lens_beliefs,
    output_beliefs,
    query_n_outcome,
)
from belieflens.analysis.decoders.folds import group_folds
from belieflens.analysis.decoders.heldout import heldout_distribution
from belieflens.analysis.decoders.softmax import FIT_BLAS_LIMIT
from belieflens.analysis.divergence import tvd, tvd_values
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.tables import unpad
from belieflens.dims import EPISODE, LAYER, QUERY, ROTATION
from belieflens.lens import Lens
from belieflens.lens.apply import query_blocks
from belieflens.types import DebiasMethod

SOURCES: tuple[str, ...] = ("output", "logit-lens", "tuned-lens", "decoder")
"""The values of the ``source`` dimension, in this order."""

SOURCE_DIM = "source"


DECODER_FOLDS = 5
"""Folds of the decoders' held-out fits (grouped by episode), the default of both
:func:`decoder_tvd` and :func:`summary`."""

DECODER_KIND = ("ridge on standardised features, lambda by nested CV grouped by episode, "
                "target = oracle, prediction projected onto the simplex")
"""How the decoders are fitted, as the results' attributes say it."""

MIN_DECODER_EPISODES = 3
"""Episodes a decoder needs: its penalty is chosen by cross-validation inside the training
folds of each held-out fold, so at least 3 folds of whole episodes."""


def _tvd_to_oracle(
    belief: xr.DataArray, oracle: xr.DataArray, labels: xr.DataArray
) -> xr.DataArray:
    return tvd(unpad(oracle, labels), unpad(belief, labels), dim="outcome")


def _rotation_mean(vals: np.ndarray, present: np.ndarray) -> np.ndarray:
    """One instance: mean over its present rotations ``vals [rotation, layer]`` if all finite."""
    rows = vals[present]
    if not present.any() or not np.isfinite(rows).all():
        return np.full(vals.shape[1:], np.nan)
    return np.asarray(rows.mean(axis=0))


Task = tuple[np.ndarray, np.ndarray, np.ndarray]
"""One decoder fit: (query rows, oracle targets [row, outcome], grouped folds [row])."""


def decoder_tasks(ds: xr.Dataset, rng: np.random.Generator, *,
                  n_folds: int = DECODER_FOLDS) -> list[Task]:
    """The decoder fits of a file: one per probe question (and outcome count) with an oracle
    in at least :data:`MIN_DECODER_EPISODES` episodes, its rows, oracle targets and folds of
    whole episodes (``min(n_folds, episodes)`` of them, drawn from ``rng`` question by
    question). The same ``rng`` seed gives the same tasks, so a statistic baseline
    (:mod:`belieflens.analysis.baselines`) is fitted on the decoders' own folds."""
    oracle = np.asarray(ds["oracle"].values, dtype=np.float64)
    k_q = query_n_outcome(ds)
    probe = np.asarray(ds["probe"].values).astype(str)
    episode = np.asarray(ds[EPISODE].values).astype(np.int64)
    cols = np.arange(oracle.shape[1])
    real = cols[None, :] < k_q[:, None]
    valid = np.all(np.isfinite(oracle) | ~real, axis=1) & (k_q >= 2)
    tasks: list[Task] = []
    for name in np.unique(probe[valid]):
        # one decoder per question and outcome count: a question asked over sets of different
        # sizes (dice of 4 and 6 sides under one name) is fitted per size
        for k in np.unique(k_q[valid & (probe == name)]):
            rows = np.flatnonzero(valid & (probe == name) & (k_q == k))
            eps = np.unique(episode[rows])
            if eps.size < MIN_DECODER_EPISODES:
                continue
            folds = group_folds(episode[rows], min(n_folds, int(eps.size)), rng)
            tasks.append((rows, oracle[rows][:, : int(k)], folds))
    return tasks


def rotation_mean(ds: xr.Dataset, row_values: np.ndarray, dim: str = LAYER) -> xr.DataArray:
    """Per-row values ``[query, dim]`` as dims ``(delivery, probe, episode, turn, dim)``: each
    probe instance's mean over its rotations (NaN unless every present rotation has one)."""
    grid = by_instance(ds, {"v": xr.DataArray(row_values, dims=(QUERY, dim))})
    out: xr.DataArray = xr.apply_ufunc(
        _rotation_mean, grid["v"], grid[PRESENT],
        input_core_dims=[[ROTATION, dim], [ROTATION]], output_core_dims=[[dim]],
        vectorize=True, output_dtypes=[np.float64],
    )
    return out.transpose(*INSTANCE_DIMS, dim)


def decoder_tvd(
    ds: xr.Dataset,
    rng: np.random.Generator,
    *,
    n_folds: int = DECODER_FOLDS,
    chunk: int = 256,
    memory_budget: int = 2**26,
) -> xr.DataArray:
    """Held-out decoder TVD to the oracle, dims ``(delivery, probe, episode, turn, layer)``.

    NaN where not estimable. One decoder per (probe question, layer) (:func:`decoder_tasks`),
    the one estimator's nested-CV ridge fit of the oracle distribution with folds grouped by
    episode, projected onto the simplex
    (:func:`~belieflens.analysis.decoders.heldout.heldout_distribution`); each query row is
    predicted by the decoder that did not see its episode, and a probe instance's TVD is the
    mean over its rotations. The residuals are held ``memory_budget`` bytes (stored dtype) of
    layers at a time and read in blocks of ``chunk`` queries (a dask-backed dataset: its own
    chunks).
    """
    n_q, n_layer = ds.sizes["query"], ds.sizes["layer"]
    tasks = decoder_tasks(ds, rng, n_folds=n_folds)
    row_tvd = np.full((n_q, n_layer), np.nan)
    if tasks:
        with FIT_BLAS_LIMIT:  # held here too: the fits may run on dask's threads
            _fit_rows(ds, tasks, row_tvd, chunk=chunk, memory_budget=memory_budget)
    out = rotation_mean(ds, row_tvd)
    return out.assign_coords({LAYER: list(range(n_layer))})


def _fit_task(x: np.ndarray, where: np.ndarray, task: Task) -> np.ndarray:
    """Held-out TVD ``[task row, layer]`` of one task at each layer of ``x [used row, layer,
    d_model]`` (the residuals of one layer group at the rows ``where`` indexes, in their
    stored dtype: each fit streams its rows in float64 blocks, so no float64 copy of the
    group or of the task's rows is made)."""
    rows, y, folds = task
    x = np.asarray(x)
    y_n = y / y.sum(axis=1, keepdims=True)
    out = np.empty((rows.size, x.shape[1]))
    for i in range(x.shape[1]):
        pred = heldout_distribution(x[:, i], y, folds, rows=where[rows])
        out[:, i] = tvd_values(pred, y_n, axis=1)
    return out


class _GroupRows:
    """A layer group's residuals, still lazy: a plain holder, so that dask hands the array
    to :func:`_read_group` as it is instead of computing it as a dependency."""

    __slots__ = ("array",)

    def __init__(self, array: object) -> None:
        self.array = array


def _fill_rows(x: np.ndarray, where: np.ndarray, spans: list[tuple[int, int]],
               read: Callable[[int, int, int], Any]) -> np.ndarray:
    """Fill ``x [used row, ...]`` with the rows ``where`` indexes (-1: not used), one span
    of queries at a time: ``read(i, start, stop)`` gives span ``i``'s block, read only
    where the span has a used row."""
    for i, (s, e) in enumerate(spans):
        at = where[s:e]
        keep = at >= 0
        if keep.any():
            x[at[keep]] = np.asarray(read(i, s, e))[keep]
    return x


READ_SPAN_BYTES = 2**22
"""Bytes of a layer group's rows (its layers only, stored dtype) read by one dask compute."""


def _read_group(group: _GroupRows, where: np.ndarray) -> np.ndarray:
    """The rows ``where`` indexes of a dask-backed layer group, ``[used row, layer, d_model]``
    in their stored dtype, read a span of whole dask chunks of queries at a time into one
    array.

    Gathering with dask (``resid[:, layers][rows]``) held every chunk's rows and their
    concatenation at once. Here the peak is the group and one span: as many chunks as keep
    the group's layers of them under :data:`READ_SPAN_BYTES` (one at least): one compute per
    chunk had cost more in dask's graph handling than the read.
    """
    a: Any = group.array
    sizes = [int(c) for c in a.chunks[0]]
    row_bytes = max(1, int(np.prod(a.shape[1:])) * np.dtype(a.dtype).itemsize)
    per_span = max(1, READ_SPAN_BYTES // max(1, max(sizes) * row_bytes))
    bounds = np.cumsum([0, *sizes]).tolist()
    firsts = list(range(0, len(sizes), per_span))
    spans = [(bounds[i], bounds[min(i + per_span, len(sizes))]) for i in firsts]
    x = np.empty((int((where >= 0).sum()), *a.shape[1:]), dtype=a.dtype)
    return _fill_rows(x, where, spans, lambda i, s, e: a.blocks[
        firsts[i]:firsts[i] + per_span].compute(scheduler="synchronous"))


def _parallel_slots(collection: object) -> int:
    """How many tasks dask's scheduler for ``collection`` runs at once: a distributed
    client's worker threads, the local threads' count, or 1 (the synchronous scheduler)."""
    import dask
    from dask.base import get_scheduler

    get = get_scheduler(collections=[collection])  # type: ignore[no-untyped-call]
    owner = getattr(get, "__self__", None)
    if owner is not None and hasattr(owner, "nthreads"):  # distributed.Client.get
        return max(1, sum(int(n) for n in owner.nthreads().values()))
    name = getattr(get, "__module__", "")
    if name == "dask.local":  # get_sync
        return 1
    return max(1, int(dask.config.get("num_workers", None) or os.cpu_count() or 1))


def _fit_rows(ds: xr.Dataset, tasks: list[Task], row_tvd: np.ndarray, *, chunk: int,
              memory_budget: int) -> None:
    """Fill ``row_tvd [query, layer]`` with each task's held-out TVD per row and layer.

    Layers are fitted in groups whose residuals (in their stored dtype, the rows the tasks
    use) fit ``memory_budget``. A dask-backed dataset (a study directory) is fitted one dask
    task per (layer group, decoder task) with :func:`dask.compute`, the tasks of a group
    sharing its gathered residuals: under ``analyze(..., client=...)`` each group's
    residuals are gathered and fitted on the workers and only the ``[row, layer]`` TVDs come
    back; locally the fits run on dask's threads. Groups run in waves that hold at most the
    budget: a group per slot of the scheduler, fewer where the budget holds fewer (down to
    one group, whose decoder tasks then run side by side on its one copy); a group is as many
    layers as the wave's share of the budget holds (one at least), so what is held is the
    budget whatever the study's size, up to one layer's rows. A file read lazily from disk
    is read block by block into one group at a time here.
    """
    n_q, n_layer, d = ds.sizes["query"], ds.sizes["layer"], ds.sizes["d_model"]
    used = np.unique(np.concatenate([t[0] for t in tasks]))
    where = np.full(n_q, -1, dtype=np.int64)
    where[used] = np.arange(used.size)
    resid = ds["resid"]
    itemsize = np.dtype(resid.dtype).itemsize
    lazy = resid.chunks is not None
    layer_bytes = max(1, used.size * d * itemsize)
    # groups held at once: one per slot, as many as the budget holds (a group's decoder tasks
    # differ in size, a question of 5 outcomes and rotations costing 6x one of 2, so each
    # slot gets a group's whole mix rather than one of its tasks)
    at_once = 1
    if lazy:
        at_once = max(1, min(_parallel_slots(resid.data), memory_budget // layer_bytes))
    per_pass = max(1, memory_budget // (at_once * layer_bytes))
    groups = [list(range(l0, min(n_layer, l0 + per_pass))) for l0 in range(0, n_layer, per_pass)]
    if lazy:
        from dask.base import compute
        from dask.delayed import delayed

        fit, read = delayed(_fit_task, pure=True), delayed(_read_group, pure=True)
        # one wave at a time: handed every group at once, dask reads them all before it fits
        # one, and the whole study's residuals are in memory
        for w in range(0, len(groups), at_once):
            wave = groups[w:w + at_once]
            # one read per group (its layers only), shared by the group's fits
            xs = [read(_GroupRows(resid.data[:, g[0]:g[-1] + 1]), where) for g in wave]
            parts = [fit(x, where, t) for x in xs for t in tasks]
            done = iter(compute(*parts))  # type: ignore[no-untyped-call]
            for g in wave:
                for rows, _, _ in tasks:
                    row_tvd[rows, g[0]:g[-1] + 1] = next(done)
        return
    for group in groups:
        sub = resid.isel(layer=group)
        x = _fill_rows(np.empty((used.size, len(group), d), dtype=resid.dtype), where,
                       query_blocks(resid, chunk),
                       lambda i, s, e: sub.isel(query=slice(s, e)).values)  # noqa: B023
        for task in tasks:
            row_tvd[task[0], group[0]:group[-1] + 1] = _fit_task(x, where, task)


def _over_episodes(tvds: list[xr.DataArray]) -> xr.Dataset:
    """``tvd_mean``, ``tvd_sem`` and ``n`` over episodes of each source's TVDs (in
    :data:`SOURCES` order) on dims ``(delivery, probe, turn, layer, source)``."""
    stacked = xr.concat(
        [x.transpose("delivery", "probe", EPISODE, "turn", LAYER) for x in tvds],
        dim=xr.DataArray(list(SOURCES), dims=SOURCE_DIM, name=SOURCE_DIM),
    )
    stats = mean_sem(stacked, EPISODE)
    dims = ("delivery", "probe", "turn", LAYER, SOURCE_DIM)
    res = xr.Dataset({"tvd_mean": stats["mean"].transpose(*dims),
                      "tvd_sem": stats["sem"].transpose(*dims),
                      "n": stats["n"].transpose(*dims)})
    res["tvd_mean"].attrs["description"] = "TVD to the oracle, mean over episodes"
    res["tvd_sem"].attrs["description"] = "standard error of the mean over episodes"
    return res


def summary(ds: xr.Dataset, lens: Lens | None = None, *, method: DebiasMethod = "geometric",
            decoders: bool = True, seed: int = 0, n_folds: int = DECODER_FOLDS,
            chunk: int = 256,
            logit_lens: xr.DataArray | None = None,
            decoder_rows: xr.DataArray | None = None) -> xr.Dataset:
    """TVD to the oracle per (delivery, probe, turn, layer, source): mean and SEM over episodes.

    ``lens`` is the tuned-lens column's :class:`~belieflens.lens.Lens` (e.g. a
    :class:`~belieflens.lens.TunedLens`, checked against the file's
    ``weights_hash`` first). ``decoders=False`` skips the decoder fits (their column is NaN).
    ``seed`` seeds the decoders' fold assignment. ``logit_lens``: the file's
    :func:`~belieflens.analysis.beliefs.lens_beliefs` with ``method``, where the caller has
    them already (else computed here). ``decoder_rows``: likewise the decoders' TVDs,
    :func:`decoder_tvd` of the file with ``np.random.default_rng(seed)``, ``n_folds`` and
    ``chunk`` (the report fits them first, before the other results are
    held, since their fits are its memory peak). Variables: ``tvd_mean``, ``tvd_sem``,
    ``n`` (episodes with a value); see the module docstring for the sources.
    """
    if lens is not None:
        lens.check_file(ds)
    beliefs = output_beliefs(ds, method=method)
    oracle, labels = beliefs["oracle"], beliefs["outcome_label"]
    layers = list(range(ds.sizes[LAYER]))
    layer = xr.DataArray(layers, dims=LAYER, coords={LAYER: layers})
    out_tvd = _tvd_to_oracle(beliefs["belief"], oracle, labels).broadcast_like(layer)
    logit = logit_lens if logit_lens is not None else lens_beliefs(ds, method=method, chunk=chunk)
    logit_tvd = _tvd_to_oracle(logit, oracle, labels)
    nan = xr.full_like(logit_tvd, np.nan)
    tuned_tvd = (
        _tvd_to_oracle(lens_beliefs(ds, method=method, lens=lens, chunk=chunk),
                       oracle, labels)
        if lens is not None
        else nan
    )
    if decoders:
        decoder_da = decoder_rows if decoder_rows is not None else decoder_tvd(
            ds, np.random.default_rng(seed), n_folds=n_folds, chunk=chunk)
        decoder_da = decoder_da.where(logit_tvd.notnull())  # NaN where no oracle or instance
    else:
        decoder_da = nan
    res = _over_episodes([out_tvd, logit_tvd, tuned_tvd, decoder_da])
    res.attrs.update({
        "debias": method,
        "output_layer": "repeated: the output belief does not depend on the layer",
        "tuned_lens": int(lens is not None),
        "decoders": int(decoders),
        "decoder_kind": DECODER_KIND,
        "decoder_folds": n_folds,
        "seed": seed,
        "lens_multi_token": str(logit.attrs.get("multi_token")),
    })
    return res
