"""The study file an intervention reads: its queries as tokens, their coordinates, its model.

An intervention re-runs a study's own read-outs, so everything comes from the cache file
(:func:`belieflens.store.file.open_cache`, which refuses damaged, incomplete or
incomplete-schema files in one line): the exact context token ids, the answer position, the
option continuations, the rotation's outcome order, the oracle and the coordinates. The
residuals (``resid``) stay on disk until :func:`study_resid` reads the layers asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.beliefs import belief_mean
from belieflens.dims import DELIVERY, EPISODE, PROBE, QUERY, ROTATION, TURN
from belieflens.errors import CacheFileError, ParameterError
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery
from belieflens.store.cache import cache_attrs
from belieflens.store.file import open_cache
from belieflens.store.integrity import damage_line

NEEDED: tuple[str, ...] = (
    "input_ids", "answer_pos", "option_ids", "outcome", "outcome_label", "oracle",
    EPISODE, TURN, ROTATION, PROBE, DELIVERY,
)
"""Variables every intervention reads from the study file."""

QUERY_VARS: tuple[str, ...] = (
    EPISODE, TURN, ROTATION, PROBE, DELIVERY, "outcome", "n_outcome", "oracle",
    "outcome_label", "option_logprob",
)
"""Per-query variables copied from the study into a result file (analysis needs no study)."""

FINGERPRINT_ATTR = "study_fingerprint"
"""Root attribute of a study file holding its fingerprint (:mod:`belieflens.run.resume`)."""


@dataclass(frozen=True)
class StudyReadouts:
    """A study file's read-outs, ready to run again.

    ``queries[i]`` is query ``i`` of the file as tokens; ``table`` holds the small
    per-query variables of :data:`QUERY_VARS` on dim ``query`` (loaded in memory).
    """

    path: Path
    fingerprint: str
    attrs: Mapping[str, Any]
    queries: tuple[TokenizedQuery, ...]
    table: xr.Dataset
    n_layers: int
    d_model: int

    @property
    def n_query(self) -> int:
        """Number of read-outs in the study."""
        return len(self.queries)

    def select(self, rows: Sequence[int] | NDArray[np.int64]) -> xr.Dataset:
        """The per-query table at ``rows`` (study query indices)."""
        return self.table.isel({QUERY: np.asarray(rows, dtype=np.int64)})


@dataclass(frozen=True)
class Selection:
    """Which read-outs of a study an intervention runs on: those at the given turns, probes,
    deliveries and episodes (``None``: any).

    Examples:
        >>> select = belieflens.Selection(turns=(2,), probes=("next-flip",))
        >>> select.turns, select.deliveries
        ((2,), None)
    """

    turns: tuple[int, ...] | None = None
    probes: tuple[str, ...] | None = None
    deliveries: tuple[str, ...] | None = None
    episodes: tuple[int, ...] | None = None

    def mask(self, study: StudyReadouts) -> NDArray[np.bool_]:
        """Whether each of the study's read-outs is selected (``[query]``)."""
        t = study.table
        keep = np.ones(study.n_query, dtype=bool)
        for name, allowed in (("turn", self.turns), ("probe", self.probes),
                              ("delivery", self.deliveries), ("episode", self.episodes)):
            if allowed is not None:
                values = np.asarray(t[name].values)
                keep &= np.isin(values.astype(str) if values.dtype.kind in "OUS" else values,
                                np.asarray(list(allowed)))
        return keep

    def rows(self, study: StudyReadouts) -> NDArray[np.int64]:
        """Study query indices selected, in study order; one line if none is."""
        rows = np.flatnonzero(self.mask(study))
        if rows.size == 0:
            raise ParameterError("the selection (--turn, --probe, --delivery, --episode) "
                                 "holds no read-out of the study")
        return rows


def _unpad(row: NDArray[np.int64]) -> tuple[int, ...]:
    return tuple(int(t) for t in row if t >= 0)


def read_study(path: str | Path, *, need: Sequence[str] = ()) -> StudyReadouts:
    """Read a study file's queries and per-query table; one line if it cannot be used.

    ``need`` names variables the caller needs beyond :data:`NEEDED` (e.g. ``resid``).
    """
    p = Path(path)
    ds = open_cache(p)
    try:
        missing = [v for v in (*NEEDED, *need) if v not in ds.variables]
        if missing:
            raise CacheFileError(
                f"{p} lacks variables an intervention needs: {', '.join(missing)}"
            )
        ids = np.asarray(ds["input_ids"].values, dtype=np.int64)
        answer = np.asarray(ds["answer_pos"].values, dtype=np.int64)
        opt = np.asarray(ds["option_ids"].values, dtype=np.int64)
        outcome = np.asarray(ds["outcome"].values, dtype=np.int64)
        spans = (np.asarray(ds["context_span"].values, dtype=np.int64)
                 if "context_span" in ds.variables else None)
        queries = []
        for i in range(ids.shape[0]):
            ctx = _unpad(ids[i])
            options = tuple(c for c in (_unpad(o) for o in opt[i]) if c)
            shown = tuple(int(o) for o in outcome[i][: len(options)])
            if not ctx or not options or int(answer[i]) != len(ctx) - 1:
                raise CacheFileError(f"{p}: query {i} has no context, no options, or an "
                                     "answer position that is not its last context token")
            roles = () if spans is None else tuple(int(c) for c in spans[i, : len(ctx)])
            queries.append(TokenizedQuery(ctx, options, shown, "", roles))
        cols: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
        for v in QUERY_VARS:
            if v in ds.variables:
                values = np.asarray(ds[v].values)
                cols[v] = (tuple(str(d) for d in ds[v].dims),
                           values.astype(str) if values.dtype.kind in "OUS" else values)
        if "n_outcome" not in cols:
            labels = cols["outcome_label"][1]
            cols["n_outcome"] = ((QUERY,), (labels != "").sum(axis=1).astype(np.int32))
        table = xr.Dataset(cols)
        layers = int(ds.sizes.get("layer", 0))
        d_model = int(ds.sizes.get("d_model", 0))
        attrs = dict(ds.attrs)
    finally:
        ds.close()
    table = table.reset_coords()
    return StudyReadouts(
        path=p, fingerprint=str(attrs.get(FINGERPRINT_ATTR, "unknown")), attrs=attrs,
        queries=tuple(queries), table=table, n_layers=max(layers - 1, 0), d_model=d_model,
    )


def study_resid(study: StudyReadouts, layers: Sequence[int], rows: Sequence[int] | None = None,
                ) -> NDArray[np.float64]:
    """The study's stored residuals ``[query, layer, d_model]`` at ``layers`` (float64).

    Read through h5py, not xarray: steering and erasure read one layer per fold, and opening
    a study as a dataset costs a fraction of a second each time (its dimension scales are
    resolved variable by variable). The whole selection is read in one slab along the
    smaller of its two index lists (h5py takes one list per read); a damaged chunk (its
    checksum) is refused in one line (:class:`CacheFileError`).
    """
    want_layers = [int(layer) for layer in layers]
    try:
        with h5py.File(study.path, "r") as f:
            if "resid" not in f:
                raise CacheFileError(
                    f"{study.path} lacks variables an intervention needs: resid")
            dset = f["resid"]
            n_query, n_layer = int(dset.shape[0]), int(dset.shape[1])
            want_rows = list(range(n_query)) if rows is None else [int(r) for r in rows]
            if not want_rows or not want_layers:
                return np.zeros((len(want_rows), len(want_layers), int(dset.shape[2])))
            if rows is None:
                block = _read_along(dset, 1, want_layers)
            elif len(want_rows) * n_layer <= n_query * len(want_layers):
                block = _read_along(dset, 0, want_rows)[:, want_layers, :]
            else:
                block = _read_along(dset, 1, want_layers)[want_rows]
    except OSError as e:
        raise CacheFileError(damage_line(study.path, "resid", e)) from None
    return np.asarray(block, dtype=np.float64)


def _read_along(dset: h5py.Dataset, axis: int, index: list[int]) -> NDArray[Any]:
    """``dset`` taken at ``index`` (any order, repeats allowed) along ``axis``."""
    unique, inverse = np.unique(np.asarray(index, dtype=np.int64), return_inverse=True)
    key: list[Any] = [slice(None)] * dset.ndim
    key[axis] = unique.tolist()
    data = np.asarray(dset[tuple(key)])
    return np.take(data, inverse.reshape(-1), axis=axis)


def check_model(study: StudyReadouts, model: LoadedModel) -> None:
    """Refuse (one line) a model whose weights or shape differ from the study's model."""
    want = str(study.attrs.get("weights_hash", ""))
    if want and want != model.info.weights_hash:
        raise ParameterError(
            f"model {model.info.spec!r} (weights sha256 {model.info.weights_hash[:12]}) is not "
            f"the model of {study.path} (weights sha256 {want[:12]}, "
            f"{study.attrs.get('model_id', '?')}): pass --model {study.attrs.get('model_spec', '')}"
        )
    if study.n_layers and (study.n_layers, study.d_model) != (
        model.info.n_layers, model.info.d_model
    ):
        raise ParameterError(
            f"model {model.info.spec!r} has {model.info.n_layers} layers of width "
            f"{model.info.d_model}; {study.path} was extracted with {study.n_layers} of "
            f"width {study.d_model}"
        )


def study_model_spec(path: str | Path) -> str:
    """The ``--model`` a study file was extracted with (its ``model_spec`` attribute)."""
    return str(cache_attrs(path).get("model_spec", ""))


def oracle_mean(table: xr.Dataset) -> NDArray[np.float64]:
    """Each query's oracle point estimate (:func:`belief_mean` of its ``oracle``), NaN where
    the query has no oracle: the concept that steering and erasure fit on."""
    oracle = np.asarray(table["oracle"].values, dtype=np.float64)
    labels = np.asarray(table["outcome_label"].values).astype(str)
    out = np.full(oracle.shape[0], np.nan)
    for i in range(oracle.shape[0]):
        out[i] = float(belief_mean(oracle[i], list(labels[i])))
    return out


def with_table(ds: xr.Dataset, table: xr.Dataset, n_opt: int) -> xr.Dataset:
    """``ds`` with the per-read-out variables of ``table`` added (options cut to ``n_opt``;
    the study's ``option_logprob`` renamed ``study_option_logprob``).

    The dataset is rebuilt in one go: the study's ``outcome[query, option]`` shares its name
    with the ``outcome`` dimension, which xarray accepts when building but not when merging.
    """
    data: dict[str, Any] = {
        str(k): xr.Variable(v.dims, v.values, v.attrs) for k, v in ds.data_vars.items()
    }
    for name, var in table.data_vars.items():
        if "option" in var.dims:
            var = var.isel(option=slice(0, n_opt))
        key = "study_option_logprob" if name == "option_logprob" else str(name)
        data[key] = xr.Variable(var.dims, var.values)
    coords = {str(k): ds.coords[k] for k in ds.indexes}
    return xr.Dataset(data, coords=coords, attrs=ds.attrs)


__all__ = [
    "FINGERPRINT_ATTR", "NEEDED", "QUERY_VARS", "Selection", "StudyReadouts",
    "check_model", "oracle_mean", "read_study",
    "study_model_spec", "study_resid", "with_table",
]
