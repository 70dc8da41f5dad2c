"""A study directory: standalone shard files of the cache schema plus an atomic manifest.

A sharded extraction (:mod:`belieflens.run.shards`) writes one shard file per run of whole
windows into a directory, with a manifest (:mod:`.manifest`) naming them. Here a finished
directory is checked against its manifest, opened as one dask-backed dataset
(:func:`open_study`, :func:`open_cache`) and merged into the single file one process would
have written (:func:`merge`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.dims import QUERY, dim
from belieflens.errors import CacheFileError, ParameterError
from belieflens.store import manifest as mf
from belieflens.store import space
from belieflens.store.file import (
    MODEL_ROWS,
    SCHEMA,
    STR,
    PartialFile,
    Sizes,
    StoreDType,
    VarSpec,
    allocation_bytes,
    chunk_rows,
    create_partial,
    partial_path,
    text_bytes,
)
from belieflens.store.file import cache_attrs as file_attrs
from belieflens.store.file import open_cache as open_file
from belieflens.store.fingerprint import FINGERPRINT_ATTR, STUDY_ATTR
from belieflens.store.integrity import verify_file
from belieflens.store.lock import write_lock

SHARD_ATTRS = ("shard_of", "shard_index", "shard_rows")
"""Root attributes only a shard file has: the whole study's fingerprint, its index, its rows."""


def shard_attrs(path: Path) -> dict[str, Any]:
    """The shard attributes of ``path`` (``shard_of``, ``shard_rows``, ``status``)."""
    import h5py

    try:
        with h5py.File(path, "r", locking=False) as h:
            raw = {k: h.attrs[k] for k in ("shard_of", "shard_rows", "status") if k in h.attrs}
    except (OSError, KeyError, ValueError) as e:
        raise CacheFileError(f"{path} is unreadable: {e}") from None
    out: dict[str, Any] = {}
    for k, v in raw.items():
        text = v.decode() if isinstance(v, bytes) else str(v)
        out[k] = json.loads(text) if k == "shard_rows" else text
    return out


def _checked_shards(directory: Path) -> tuple[mf.Manifest, list[Path]]:
    """The manifest and shard paths of a complete study directory, each shard checked."""
    m = mf.read_manifest(directory)
    waiting = [s.file for s in m.shards if s.state != "done"]
    if m.state != "complete" or waiting:
        raise CacheFileError(
            f"{directory} is incomplete ({len(m.shards) - len(waiting)} of {len(m.shards)} "
            "shards done): rerun the same `belieflens extract` command to resume"
        )
    paths = []
    for s in m.shards:
        p = directory / s.file
        if not p.is_file():
            raise CacheFileError(f"{directory}: shard {s.file} is missing")
        attrs = shard_attrs(p)
        if attrs.get("status") != "complete":
            raise CacheFileError(f"{p} is incomplete (status {attrs.get('status')!r})")
        if attrs.get("shard_of") != m.study_fingerprint:
            raise CacheFileError(
                f"{p} is a shard of another study (fingerprint "
                f"{str(attrs.get('shard_of'))[:12]}, the manifest's {m.study_fingerprint[:12]})"
            )
        if attrs.get("shard_rows") != list(s.rows):
            raise CacheFileError(
                f"{p} holds rows {attrs.get('shard_rows')}, the manifest says {list(s.rows)}"
            )
        paths.append(p)
    return m, paths


def open_study(directory: Path, *, chunks: Mapping[str, int] | None = None) -> xr.Dataset:
    """One dask-backed ``xarray.Dataset`` over a study directory's shards, in query order.

    Checked against the manifest first (every shard finished, of this study, rows with no
    gap and no duplicate); each shard is opened by :func:`belieflens.store.file.open_cache`
    (its checks, and every chunk read against its checksum), with ``chunks`` (default: whole
    HDF5 chunks of rows, as many as keep the widest per-query variable's dask chunk under
    about 8 MiB, so a task's memory is bounded whatever the study's size), and the shards
    are concatenated along ``query``. It holds
    what plain xarray gives with::

        xr.open_mfdataset(sorted(glob("DIR/shard-*.h5")), engine="h5netcdf", combine="nested",
                          concat_dim="query", data_vars="minimal", coords="minimal",
                          compat="override", combine_attrs="override")

    with the whole study's ``study`` and ``study_fingerprint`` as attributes.
    """
    m, paths = _checked_shards(directory)
    rows = default_chunk_rows(paths[0], chunk_rows(m.window)) if paths else 1
    parts = [open_file(p, chunks=dict(chunks) if chunks else {QUERY: rows}) for p in paths]
    ds = xr.concat(parts, dim=QUERY, data_vars="minimal", coords="minimal", compat="override",
                   join="outer", combine_attrs="override")
    attrs = {k: v for k, v in ds.attrs.items() if k not in SHARD_ATTRS}
    attrs[STUDY_ATTR] = json.dumps(dict(m.study), sort_keys=True, default=str)
    attrs[FINGERPRINT_ATTR] = m.study_fingerprint
    ds.attrs = attrs

    # the shards' closers only: a closure over the shard datasets kept each one's eagerly
    # loaded variables alive beside their concatenation, as long as the study was open
    closers = [part._close for part in parts]
    del parts

    def close() -> None:
        for closer in closers:
            if closer is not None:
                closer()

    ds.set_close(close)
    return ds


CHUNK_BYTES = 8 * 2**20
"""About the most bytes a default dask chunk of one per-query variable holds."""


def default_chunk_rows(path: Path, rows: int, budget: int = CHUNK_BYTES) -> int:
    """Rows per dask chunk: a multiple of the file's ``rows`` per HDF5 chunk, as many as keep
    the widest per-query variable's chunk under ``budget`` bytes (at least one HDF5 chunk)."""
    import h5netcdf

    widest = 1
    with h5netcdf.File(path, "r") as f:
        for var in f.variables.values():
            if var.dimensions[:1] == (QUERY,) and len(var.shape) > 1 and var.dtype != str:
                widest = max(widest, int(np.prod(var.shape[1:])) * np.dtype(var.dtype).itemsize)
    return rows * max(1, budget // (rows * widest))


def cache_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files that hold a cache: ``path`` itself, or a study directory's shard files in
    query order (checked against its manifest first)."""
    p = Path(path)
    if p.is_dir():
        return _checked_shards(p)[1]
    return [p]


def open_cache(
    path: str | os.PathLike[str], *, chunks: Mapping[str, int] | None = None
) -> xr.Dataset:
    """Open a cache file (:func:`belieflens.store.file.open_cache`) or a study directory
    (:func:`open_study`: one dask-backed dataset over its shards) as an ``xarray.Dataset``.

    Large variables (``resid``) stay on disk until read, each chunk checked against its
    checksum when it is; ``chunks`` sets dask chunks along ``query``. ``belieflens.open_cache``
    is this function.

    Args:
        path: a cache file, or a study directory written on a cluster.
        chunks: dask chunk sizes by dimension (default: whole HDF5 chunks of rows).

    Returns:
        One row per read-out along ``query``: ``resid[query, layer, d_model]``,
        ``option_logprob[query, option]``, ``oracle[query, outcome]``, ... (the schema:
        :data:`belieflens.store.file.SCHEMA`), with ``ds.bl`` for the analysis.

    Examples:
        >>> ds = belieflens.open_cache("study.h5")
        >>> ds["resid"].dims, ds.sizes["layer"]
        (('query', 'layer', 'd_model'), 31)
    """
    p = Path(path)
    if p.is_dir():
        return open_study(p, chunks=chunks)
    return open_file(p, chunks=chunks)


def cache_attrs(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The root attributes ``open_cache(path).attrs`` holds, read without opening the
    variables of a cache file (a study directory is opened)."""
    p = Path(path)
    if p.is_dir():
        with open_study(p) as ds:
            return dict(ds.attrs)
    return file_attrs(p)


def _spec_of(name: str, var: Any) -> VarSpec:
    dtype = var.dtype
    kind: StoreDType
    if dtype is str or getattr(dtype, "kind", "") in "OSU":
        kind = STR
    else:
        code = np.dtype(dtype).str[1:]
        kind = "f8" if code == "f8" else "f4" if code == "f4" else "i1" if code == "i1" else "i4"
    return VarSpec(name, tuple(dim(d) for d in var.dimensions), kind,
                   str(var.attrs.get("description", "")))


def _slabs(paths: list[Path], rows: list[tuple[int, int]], names: list[str],
           step: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    import h5netcdf

    for p, (lo, hi) in zip(paths, rows, strict=True):
        with h5netcdf.File(p, "r") as f:
            for a in range(0, hi - lo, step):
                b = min(a + step, hi - lo)
                yield lo + a, {n: np.asarray(f.variables[n][a:b]) for n in names
                               if n in f.variables}


def merge(directory: str | os.PathLike[str], out: str | os.PathLike[str], *,
          overwrite: bool = False) -> Path:
    """Write the single cache file one process would have written from a study directory.

    Its variables equal the single-process file's bit for bit; its attributes are the first
    shard's provenance with the whole study's ``study`` and ``study_fingerprint``. Every
    shard's chunks are checked first, then the free space for the merged file (one
    :class:`~belieflens.errors.StorageError` line if short, nothing written); a full disk or
    an I/O error on the way removes what was written and is one line too.
    ``belieflens.merge`` is this function.

    Args:
        directory: the study directory (shard files and ``manifest.json``).
        out: the cache file to write.
        overwrite: replace an existing ``out``.

    Returns:
        The path written: one cache file of the usual schema (dims ``query, layer, ...``).

    Examples:
        Not run by the tests here (it needs a study directory, written on a cluster; the
        tests of :mod:`belieflens.run.shards` merge one):

        >>> belieflens.merge("study/", "merged.h5")  # doctest: +SKIP
        PosixPath('merged.h5')
    """
    import h5netcdf

    directory, target = Path(directory), Path(out)
    if target.is_dir():
        raise ParameterError(f"'{target}' is a directory: merge writes one .h5 file")
    if target.exists() and not overwrite:
        raise ParameterError(f"{target} exists; pass --overwrite to replace it")
    if not target.parent.is_dir():
        raise ParameterError(f"folder {target.parent} does not exist")
    m, paths = _checked_shards(directory)
    for p in paths:  # nothing is written from a damaged shard: every chunk checked first
        verify_file(p)
    sizes = Sizes(**m.study["sizes"])
    window = m.window
    with write_lock(target):
        partial_path(target).unlink(missing_ok=True)
        with h5netcdf.File(paths[0], "r") as f:
            attrs = {k: v for k, v in f.attrs.items()
                     if k not in (*SHARD_ATTRS, "status", "schema_version")}
            static = {n: np.asarray(v[...]) for n, v in f.variables.items()
                      if QUERY not in v.dimensions}
            extra = [_spec_of(n, v) for n, v in f.variables.items() if n not in SCHEMA]
            row_names = [n for n, v in f.variables.items()
                         if v.dimensions[:1] == (QUERY,) and n not in MODEL_ROWS
                         and n != "complete"]
            model_names = [n for n in MODEL_ROWS if n in f.variables]
            resid_dtype = str(f.variables["resid"].dtype)
        if "token_text_id" in static:  # not in the study's sizes (store.fingerprint.Study)
            sizes = dataclasses.replace(sizes, text_token=len(static["token_text_id"]))
        attrs[STUDY_ATTR] = json.dumps(dict(m.study), sort_keys=True, default=str)
        attrs[FINGERPRINT_ATTR] = m.study_fingerprint
        rows = [s.rows for s in m.shards]
        step = max(window, 1024)
        text = sum(text_bytes(v.ravel()) for v in static.values() if v.dtype == object)
        text += sum(text_bytes(v.ravel()) for _, values in _slabs(paths, rows, row_names, step)
                    for v in values.values() if v.dtype == object)
        needed = allocation_bytes(sizes, resid_dtype=resid_dtype, extra=extra, text=text,
                                  rows_per_chunk=chunk_rows(window))
        try:
            create_partial(target, sizes, attrs, static=static,
                           row_slabs=_slabs(paths, rows, row_names, step),
                           resid_dtype=resid_dtype, rows_per_chunk=chunk_rows(window),
                           extra=extra, needed=needed)
            writer = PartialFile(partial_path(target))
            for start, values in _slabs(paths, rows, model_names, window):
                writer.write_rows(start, values)
            return writer.finish(target)
        except BaseException as e:  # a merge does not resume: nothing of it is kept
            kind = space.fault(e)
            partial_path(target).unlink(missing_ok=True)
            if kind is None:
                raise
            raise space.fault_error(kind, target, f"while merging into {target}",
                                    "rerun the same command") from None
