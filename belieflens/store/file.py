"""The cache file: HDF5 in a netCDF-compatible layout that opens as an ``xarray.Dataset``.

One row per read-out along ``query``. Writing is crash-safe at window granularity:

1. :func:`create_partial` builds the whole file under ``<out>.partial.new``: every
   variable at its final size with its storage allocated up front, every row's
   static content (token ids, labels, oracle, coordinates) and the lens
   parameters; then it is closed, synced and renamed to ``<out>.partial``.
   From here on the file's HDF5 metadata never changes again.
2. :class:`PartialFile` fills the model's read-outs window by window: it opens
   the file, writes the rows' raw data, syncs, then sets their ``complete``
   flags, syncs and closes. Only raw bytes at fixed offsets are written, so a
   process killed at any instant leaves a readable file whose ``complete``
   rows are exactly the rows fully written.
3. :meth:`PartialFile.finish` flips the fixed-size ``status`` attribute to
   ``complete`` in place and renames the file to ``<out>``, so a finished path
   never holds a truncated file.

Variables (dims in brackets): see :data:`SCHEMA`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

import h5netcdf
import h5py
import numpy as np
import xarray as xr

from belieflens.dims import (
    CONT_EXTRA,
    CONT_TOKEN,
    D_MODEL,
    DELIVERY,
    ENV,
    EPISODE,
    KIND,
    LAYER,
    LENS_TOKEN,
    OPTION,
    OUTCOME,
    PROBE,
    QUERY,
    ROTATION,
    STATE,
    TEXT_TOKEN,
    TOKEN,
    TURN,
    VOCAB,
    Dim,
    dim,
)
from belieflens.errors import CacheFileError
from belieflens.store import space
from belieflens.store.integrity import (
    FILTER,
    LIBVER,
    LONG_TEXT,
    TEXT_CRC_ATTR,
    damage_line,
    damaged_spans,
    netcdf_name,
    open_checked,
    read_text,
    rechecksummed,
    text_crc,
    variables,
)

SCHEMA_VERSION = 1
"""Bumped whenever a variable changes meaning or shape."""

StoreDType = Literal["f8", "f4", "i4", "i1", "str", "resid"]
"""How a variable is stored: a NumPy dtype code, ``str`` (variable-length UTF-8 text), or
``resid`` (the run's residual storage dtype, ``--resid-dtype``)."""

STR: Final = "str"


@dataclass(frozen=True)
class VarSpec:
    """One variable of the cache file: its name, dimensions, storage dtype and meaning.

    The meaning is stored as the variable's ``description`` attribute.
    """

    name: str
    dims: tuple[Dim, ...]
    dtype: StoreDType
    meaning: str

    @property
    def per_query(self) -> bool:
        """Whether the variable has one row per read-out (its first dimension is ``query``)."""
        return bool(self.dims) and self.dims[0] == QUERY

    @classmethod
    def parse(cls, name: str, dims: Sequence[str], dtype: str, meaning: str) -> VarSpec:
        """A spec from plain strings (checked against the glossary and the storage dtypes)."""
        for allowed in get_args(StoreDType):
            if allowed == dtype:
                return cls(name, tuple(dim(d) for d in dims), allowed, meaning)
        raise ValueError(f"variable {name!r}: {dtype!r} is not a storage dtype")


def _schema(*specs: VarSpec) -> dict[str, VarSpec]:
    return {s.name: s for s in specs}


SCHEMA: Mapping[str, VarSpec] = _schema(
    VarSpec("resid", (QUERY, LAYER, D_MODEL), "resid",
            "residual stream at the answer position; layer 0 = embeddings, l = block l-1 out"),
    VarSpec("option_logprob", (QUERY, OPTION), "f8",
            "log P(whole continuation of option j) in position order"),
    VarSpec("answer_lse", (QUERY,), "f8", "logsumexp of the final logits at the answer position"),
    VarSpec("input_ids", (QUERY, TOKEN), "i4", "context token ids, BOS included (-1 = pad)"),
    VarSpec("answer_pos", (QUERY,), "i4", "index in input_ids of the last context token"),
    VarSpec("context_span", (QUERY, TOKEN), "i4",
            "role of each context token: t = turn t's evidence, -1 template (or pad), "
            "-2 the question, -3 a summary of the evidence"),
    VarSpec("option_ids", (QUERY, OPTION, CONT_TOKEN), "i4",
            "token ids of each option's continuation (-1 = pad)"),
    VarSpec("option_lens_index", (QUERY, OPTION, CONT_TOKEN), "i4",
            "row of each continuation token in lens_token_id (-1 = pad)"),
    VarSpec("outcome", (QUERY, OPTION), "i4", "outcome index shown at each position (-1 = pad)"),
    VarSpec("outcome_label", (QUERY, OUTCOME), STR,
            "the outcome's label ('' past the probe's K)"),
    VarSpec("oracle", (QUERY, OUTCOME), "f8",
            "exact Bayesian distribution over outcomes (NaN: none)"),
    VarSpec("n_outcome", (QUERY,), "i4", "number of outcomes K of the probe"),
    VarSpec("prompt", (QUERY,), STR, "the rendered context text"),
    VarSpec("complete", (QUERY,), "i1", "1 once the row is written"),
    VarSpec(EPISODE, (QUERY,), "i4", "episode index"),
    VarSpec(TURN, (QUERY,), "i4", "turn index (0 = prior)"),
    VarSpec(ROTATION, (QUERY,), "i4", "Latin-square rotation"),
    VarSpec(PROBE, (QUERY,), STR, "probe name"),
    VarSpec(KIND, (QUERY,), STR, "read-out kind: mcq or completion"),
    VarSpec(ENV, (QUERY,), STR, "environment name"),
    VarSpec(DELIVERY, (QUERY,), STR, "delivery"),
    VarSpec("lens_token_id", (LENS_TOKEN,), "i4",
            "vocabulary ids whose unembedding rows are stored"),
    VarSpec("unembed", (LENS_TOKEN, D_MODEL), "f4", "unembedding rows of lens_token_id"),
    VarSpec("unembed_bias", (LENS_TOKEN,), "f4", "unembedding bias of lens_token_id"),
    VarSpec("final_norm_gain", (D_MODEL,), "f8",
            "effective per-dimension gain of the final norm"),
    VarSpec("final_norm_bias", (D_MODEL,), "f8", "effective bias of the final norm"),
    VarSpec("logprobs", (QUERY, VOCAB), "f4",
            "full next-token log-probs at the answer position"),
    VarSpec("token_text_id", (TEXT_TOKEN,), "i4",
            "every vocabulary id of input_ids and option_ids, ascending"),
    VarSpec("token_text", (TEXT_TOKEN,), STR,
            "the tokenizer's decoding of token_text_id alone (for viewers; no tokenizer needed)"),
    VarSpec("belief_state", (QUERY, STATE), "f8",
            "exact belief over the hidden states of a token-level process after the read-out's "
            "tokens (NaN: none)"),
    VarSpec("state_label", (STATE,), STR, "the label of each hidden state of belief_state"),
    VarSpec("cont_resid", (QUERY, OPTION, CONT_EXTRA, LAYER, D_MODEL), "resid",
            "residual at continuation token i of each option's own row (predicts token "
            "i+1); only with --cont-resid, NaN where the option is shorter"),
)
"""Every variable a cache file may hold, by name, in file order (built from
:mod:`belieflens.dims`); runs add ``truth_*`` and ``generation_log`` (``extra`` of
:func:`create_partial`)."""

COORDS: tuple[str, ...] = (EPISODE, TURN, ROTATION, PROBE, KIND, ENV, DELIVERY)
"""Per-query coordinates (variables named like the glossary's dimensions)."""

REQUIRED: tuple[str, ...] = (
    "resid", "option_logprob", "input_ids", "answer_pos", "option_ids", "outcome",
    "outcome_label", "oracle", *COORDS[:4], ENV, DELIVERY,
)
"""Variables every readable cache file must hold."""


@dataclass(frozen=True)
class Sizes:
    """Dimension sizes of a cache file."""

    query: int
    layer: int
    d_model: int
    token: int
    option: int
    cont_token: int
    outcome: int
    lens_token: int
    vocab: int = 0
    cont_extra: int = 0
    text_token: int = 0
    state: int = 0
    """Hidden states of a token-level process's belief (0: no ``belief_state``)."""

    def of(self, d: Dim) -> int:
        """The size of dimension ``d``; 0 for a dimension a cache file does not have."""
        n = getattr(self, d, 0)
        return int(n)

    def dims(self) -> dict[Dim, int]:
        """Every dimension of the file with its size (0: absent), in file order."""
        return {dim(f.name): int(getattr(self, f.name)) for f in dataclasses.fields(self)}


MODEL_ROWS = ("resid", "option_logprob", "answer_lse", "logprobs", "cont_resid")
"""Per-query variables computed by the model, written window by window after creation."""

STATUS_BUILDING = b"building"
STATUS_COMPLETE = b"complete"
"""Values of the ``status`` root attribute: equal length, so finishing rewrites it in place."""


def partial_path(out: Path) -> Path:
    """Where a file is written until it is complete."""
    return out.with_name(out.name + ".partial")


def chunk_rows(window: int, cap: int = 64) -> int:
    """Rows per HDF5 chunk: the largest divisor of ``window`` up to ``cap``.

    Chunks then never straddle two windows, so writing one window never rewrites
    bytes of another.
    """
    return max(d for d in range(1, min(window, cap) + 1) if window % d == 0)


def fsync(path: Path) -> None:
    """Flush ``path`` (a file, or a folder's entries) to its device."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _early_alloc() -> Any:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    return dcpl


def _write_slab(var: Any, start: int, arr: np.ndarray) -> None:
    n = arr.shape[0]
    if arr.ndim > 1:
        var[(slice(start, start + n), *tuple(slice(0, s) for s in arr.shape[1:]))] = arr
    else:
        var[start : start + n] = arr


def create_partial(
    out: Path,
    sizes: Sizes,
    attrs: Mapping[str, Any],
    *,
    static: Mapping[str, np.ndarray],
    row_slabs: Iterable[tuple[int, Mapping[str, np.ndarray]]],
    resid_dtype: str = "float32",
    rows_per_chunk: int = 64,
    extra: Iterable[VarSpec] = (),
    checksums: bool = True,
    needed: int = 0,
) -> Path:
    """Build ``<out>.partial`` with every variable allocated and every static value written.

    ``static`` holds the variables without a ``query`` dimension; ``row_slabs``
    yields ``(start, values)`` with the rows' static per-query variables. The
    file is built under a temporary name and renamed only once it is whole.

    Storage: every variable is chunked; per-query variables in chunks of
    ``rows_per_chunk`` whole rows (a divisor of the window, so writing a window
    rewrites whole chunks of that window only; analysis reads blocks of whole
    rows, every layer at once), the others in one chunk. With ``checksums`` (the
    default; ``False`` writes the format of files from before checksums, for
    tests and ``bench/checksums.py``) every numeric variable passes through
    HDF5's Fletcher-32 filter and the metadata is written in the checksummed
    HDF5 1.8 format (:mod:`belieflens.store.integrity`); text cannot be filtered,
    so each text variable stores the CRC-32 of each chunk of rows as an attribute.
    Every chunk is allocated and written with its fill value (and checksum) at
    creation (``H5D_ALLOC_TIME_EARLY``), so later writes replace chunks of the
    same size in place and never touch the file's metadata.

    ``needed``: the bytes the file will take (:func:`allocation_bytes`); with less free on
    its filesystem, one line (:class:`~belieflens.errors.StorageError`) and nothing is
    written. A fault while building it (no space left, an I/O error) removes the temporary
    file and is one line too.
    """
    target = partial_path(out)
    tmp = out.with_name(out.name + ".partial.new")
    tmp.unlink(missing_ok=True)
    if needed:
        space.require(out, needed)
    try:
        _build(tmp, sizes, attrs, static=static, row_slabs=row_slabs, resid_dtype=resid_dtype,
               rows_per_chunk=rows_per_chunk, extra=extra, checksums=checksums)
        fsync(tmp)
        os.replace(tmp, target)
        fsync(target.parent)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        kind = space.fault(e)
        if kind is None:
            raise
        raise space.fault_error(kind, out, f"while allocating {target}",
                                "rerun the same command") from None
    return target


def _specs(sizes: Sizes, extra: Iterable[VarSpec]) -> Iterator[VarSpec]:
    """The variables a file of ``sizes`` holds (those of a dimension of size 0 left out)."""
    for spec in {**SCHEMA, **{e.name: e for e in extra}}.values():
        if not any(sizes.of(d) == 0 for d in spec.dims):
            yield spec


def _build(
    tmp: Path, sizes: Sizes, attrs: Mapping[str, Any], *, static: Mapping[str, np.ndarray],
    row_slabs: Iterable[tuple[int, Mapping[str, np.ndarray]]], resid_dtype: str,
    rows_per_chunk: int, extra: Iterable[VarSpec], checksums: bool,
) -> None:
    """Write the whole file of :func:`create_partial` at ``tmp``."""
    import h5netcdf

    f = h5netcdf.File(tmp, "w", **({"libver": LIBVER} if checksums else {}))
    try:
        _fill(f, sizes, attrs, static=static, row_slabs=row_slabs, resid_dtype=resid_dtype,
              rows_per_chunk=rows_per_chunk, extra=extra, checksums=checksums)
        f.close()
    finally:
        _abandon(f)


def _abandon(f: Any) -> None:
    """Close an ``h5netcdf.File`` that failed to close (a full disk, an I/O error) without
    flushing it again: h5netcdf's ``__del__`` would retry the flush whenever the object is
    collected, on a file whose filesystem may be gone by then (a segmentation fault)."""
    if f._closed:
        return
    with suppress(Exception):
        f._h5file.close()
    f._closed = True


def _fill(
    f: Any, sizes: Sizes, attrs: Mapping[str, Any], *, static: Mapping[str, np.ndarray],
    row_slabs: Iterable[tuple[int, Mapping[str, np.ndarray]]], resid_dtype: str,
    rows_per_chunk: int, extra: Iterable[VarSpec], checksums: bool,
) -> None:
    """Every variable, static value, row slab and attribute of :func:`_build`'s file."""
    for d, n in sizes.dims().items():
        if n > 0:
            f.dimensions[d] = n
    text: list[str] = []
    for spec in _specs(sizes, extra):
        if spec.dtype == STR and spec.dims:
            text.append(spec.name)
        _create_variable(f, spec, sizes, resid_dtype=resid_dtype,
                         rows_per_chunk=rows_per_chunk, checksums=checksums)
    for name, arr in static.items():
        f.variables[name][...] = arr
    for start, values in row_slabs:
        for name, arr in values.items():
            _write_slab(f.variables[name], start, arr)
    if checksums:  # text cannot pass a filter: a CRC-32 per chunk of rows instead
        for name in text:
            _write_text_crcs(f.variables[name])
    for k, v in attrs.items():
        f.attrs[k] = _attr(v)
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["status"] = np.bytes_(STATUS_BUILDING)


METADATA_BYTES = 1 << 20
"""What :func:`allocation_bytes` allows for HDF5's metadata and attributes besides the chunks:
object headers, chunk indexes, dimension scales, the provenance (measured: under 0.3 MiB for
every study of the tests, 0.2 MiB for ``make demo``'s)."""

TEXT_ITEM_BYTES = 32
"""Bytes of one variable-length text value besides its characters: its 16-byte reference in
the variable and the 16-byte header of its object in HDF5's global heap."""


def text_bytes(values: Iterable[str | bytes]) -> int:
    """Bytes HDF5 stores for these variable-length text values (each padded to 8 bytes;
    values read back from a file may be ``bytes``)."""
    return sum(TEXT_ITEM_BYTES + -(-len(v if isinstance(v, bytes) else v.encode()) // 8) * 8
               for v in values)


def allocation_bytes(
    sizes: Sizes, *, resid_dtype: str = "float32", extra: Iterable[VarSpec] = (),
    text: int = 0, rows_per_chunk: int = 64, checksums: bool = True,
) -> int:
    """Bytes :func:`create_partial` allocates for a file of ``sizes``: every chunk of every
    variable at its full size (a variable's last chunk too), its checksum, the text's
    ``text`` bytes (:func:`text_bytes` of every value, which the caller knows) and
    :data:`METADATA_BYTES`. Text references are counted in ``text``, not per chunk."""
    total = METADATA_BYTES + text
    for spec in _specs(sizes, extra):
        if spec.dtype == STR:
            continue
        shape = [sizes.of(d) for d in spec.dims]
        chunks = 1
        if spec.per_query:
            rows = min(rows_per_chunk, shape[0])
            chunks, shape[0] = -(-shape[0] // rows), rows
        item = np.dtype(resid_dtype if spec.dtype == "resid" else spec.dtype).itemsize
        total += chunks * (int(np.prod(shape)) * item + (4 if checksums else 0))
    return total


def _create_variable(
    f: Any, spec: VarSpec, sizes: Sizes, *, resid_dtype: str, rows_per_chunk: int,
    checksums: bool,
) -> None:
    """Create ``spec``'s variable in ``f``: dtype, fill value, chunks, filter, attributes."""
    if spec.dtype == STR:
        h5dtype: Any = h5py.string_dtype()
        fill: Any = None
    elif spec.dtype == "resid":
        h5dtype = np.dtype(resid_dtype)
        fill = np.nan
    else:
        h5dtype = np.dtype(spec.dtype)
        # integers keep HDF5's default fill (0) and no _FillValue, so xarray keeps
        # them integer; padding is written explicitly as -1
        fill = np.nan if h5dtype.kind == "f" else None
    shape = [sizes.of(d) for d in spec.dims]
    if spec.per_query:
        shape[0] = min(rows_per_chunk, shape[0])
    chunks = tuple(shape) if shape and (checksums or spec.per_query) else None
    kwargs: dict[str, Any] = {"chunks": chunks, "dcpl": _early_alloc()}
    if checksums and chunks is not None and spec.dtype != STR:
        kwargs[FILTER] = True
    if fill is not None:
        kwargs["fillvalue"] = fill
    var = f.create_variable(spec.name, spec.dims, dtype=h5dtype, **kwargs)
    var.attrs["description"] = spec.meaning
    if spec.per_query and spec.name not in COORDS:
        var.attrs["coordinates"] = " ".join(COORDS)


def _write_text_crcs(var: Any) -> None:
    """Store the CRC-32 of each chunk of rows of the text variable ``var`` as an attribute."""
    step = var.chunks[0] if var.chunks else var.shape[0]
    n = var.shape[0]
    var.attrs[TEXT_CRC_ATTR] = np.array(
        [text_crc(var[a : min(a + step, n)]) for a in range(0, n, step)],
        dtype=np.uint32)


@dataclass(frozen=True)
class PartialState:
    """What an existing partial file holds: its study attributes and completed rows."""

    path: Path
    attrs: Mapping[str, str]
    complete: np.ndarray


def read_partial(path: Path) -> PartialState:
    """Read a partial file's root attributes and ``complete`` flags, or raise one line."""
    try:
        if not h5py.is_hdf5(path):
            raise CacheFileError(f"{path} is not an HDF5 file")
        with h5py.File(path, "r") as h:
            attrs = {k: _text(v) for k, v in h.attrs.items()}
            complete = np.asarray(h["complete"][...]).astype(bool)
    except CacheFileError:
        raise
    except (OSError, KeyError, ValueError, RuntimeError, TypeError, UnicodeDecodeError) as e:
        raise CacheFileError(
            f"{path} is damaged or not a belieflens partial file ({_first_line(e)})"
        ) from None
    return PartialState(path, attrs, complete)


Run = tuple[int, Mapping[str, np.ndarray]]
"""Model rows ``start:start+n`` of a partial file: ``(start, values)``, each value ``n`` rows."""


class PartialFile:
    """An allocated partial file that takes the model's read-outs, a run of rows at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write_rows(self, start: int, values: Mapping[str, np.ndarray]) -> None:
        """Write model rows ``start:start+n``, sync, then mark them complete and sync again
        (:meth:`write_runs` of one run)."""
        self.write_runs([(start, values)])

    def write_runs(self, runs: Sequence[Run]) -> None:
        """Write runs of model rows, sync, then mark them all complete and sync again.

        The file is opened without HDF5's own file lock (the extraction holds
        :func:`belieflens.store.lock.write_lock`), so a reader such as
        ``belieflens info`` never makes the writer fail.

        Only raw data at fixed offsets is written (storage was allocated at
        creation), so a kill at any instant leaves the file readable, and a row's
        ``complete`` flag is set only after its data reached the file. A chunk a run fills
        only in part is read back and rewritten whole by HDF5, its complete rows with the
        same bytes they had.
        """
        names = {name for _, values in runs for name in values}
        for name in names:
            if name not in MODEL_ROWS:
                raise ValueError(f"{name} is not a model read-out variable")
        try:
            self._write(runs)
        except OSError as e:
            # a kill in the middle of writing a chunk can leave it torn: its checksum fails,
            # and HDF5 reads back a chunk a run fills only in part, so checksum the torn
            # chunks of these runs again and write once more (a storage fault is not a tear)
            if space.fault(e) is not None or not self._repair_torn_chunks(
                    runs, [*sorted(names), "complete"]):
                raise
            self._write(runs)

    def _write(self, runs: Sequence[Run]) -> None:
        with h5py.File(self.path, "r+", locking=False) as h:
            for start, values in runs:
                for name, arr in values.items():
                    _write_slab(h[name], start, arr)
            h.flush()
            os.fsync(h.id.get_vfd_handle())
            for start, values in runs:
                n = next(iter(values.values())).shape[0]
                h["complete"][start : start + n] = 1
            h.flush()
            os.fsync(h.id.get_vfd_handle())

    def _repair_torn_chunks(self, runs: Sequence[Run], names: Sequence[str]) -> bool:
        """Give each chunk of ``runs``' rows that fails to read its checksum again, from the
        bytes it holds (same size, same offset: metadata untouched); whether any was.

        A torn chunk holds the bytes of two writes of it: rows complete before either
        write kept the same bytes in both, and the rows being written are written again.
        Chunks outside these runs' rows are not looked at (their damage stays refused).
        """
        spans = [(start, start + next(iter(v.values())).shape[0]) for start, v in runs]
        torn: list[tuple[int, bytes]] = []
        with h5py.File(self.path, "r", locking=False) as h:
            for name in names:
                dset = h[name]
                if dset.chunks is None:
                    continue
                for lo in _torn_chunks(dset, spans):
                    info = dset.id.get_chunk_info_by_coord((lo, *(0,) * (dset.ndim - 1)))
                    _, raw = dset.id.read_direct_chunk((lo, *(0,) * (dset.ndim - 1)))
                    raw = rechecksummed(dset, bytes(raw))
                    if info.byte_offset is None or info.size != len(raw):
                        return False
                    torn.append((int(info.byte_offset), raw))
        if not torn:
            return False
        fd = os.open(self.path, os.O_WRONLY)
        try:
            for offset, raw in torn:
                os.pwrite(fd, raw, offset)
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def finish(self, out: Path) -> Path:
        """Mark the file complete (in place) and move it to ``out``."""
        with h5py.File(self.path, "r+", locking=False) as h:
            if not bool(np.all(h["complete"][...] == 1)):
                raise CacheFileError(f"{self.path}: not every row is complete")
            h.attrs.modify("status", np.bytes_(STATUS_COMPLETE))
            h.flush()
            os.fsync(h.id.get_vfd_handle())
        os.replace(self.path, out)
        fsync(out.parent)
        return out


def _torn_chunks(dset: h5py.Dataset, spans: Sequence[tuple[int, int]]) -> list[int]:
    """First rows of the chunks of ``dset`` over rows ``spans`` that fail to read."""
    step = dset.chunks[0]
    return sorted({lo for a, b in spans for c, d in damaged_spans(dset, (a, b))
                   for lo in range(c, d, step)})


def _attr(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    return v


LAZY = ("resid", "logprobs", "prompt", "input_ids", "cont_resid")
"""Large variables that stay on disk until read; the rest load (and are checked) at open."""

_READ_ERRORS = (
    OSError, KeyError, ValueError, RuntimeError, TypeError, IndexError, UnicodeDecodeError,
    AttributeError, OverflowError,
)
"""What h5py, h5netcdf and xarray raise on damaged files."""


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:200]


def progress_text(state: PartialState) -> str:
    """``'12 of 40 read-outs written'`` for a partial file."""
    return f"{int(state.complete.sum())} of {state.complete.size} read-outs written"


def open_cache(
    path: str | os.PathLike[str], *, chunks: Mapping[str, int] | None = None
) -> xr.Dataset:
    """Open a cache file as an ``xarray.Dataset`` (large variables stay lazy).

    Raises :class:`CacheFileError` with one line if the file is missing, not HDF5,
    corrupt, incomplete (still being written, or killed), of another schema
    version, lacks required variables, or holds out-of-range indices. The small
    variables are loaded and checked here, so analysis code can trust them.

    Every chunk HDF5 reads is checked against its checksum (files written before
    checksums open too, unchecked): the small variables here, the lazy ones
    (``resid``, ``logprobs``, ...) whenever they are read, by analysis code or a
    dask task. A damaged chunk raises :class:`CacheFileError` naming the file,
    the variable and its damaged rows (:mod:`belieflens.store.integrity`).
    """
    p = Path(path)
    texts = _checked_header(p, read_texts=True)
    try:
        ds = open_checked(p, chunks=dict(chunks) if chunks else None)
    except _READ_ERRORS as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {_first_line(e)}") from None
    try:
        for text, values in texts.items():
            if text in ds.variables:
                ds.variables[text].data = values if text in LONG_TEXT else values.astype(str)
        _load_eager(ds, p)
        problem = _check_values(ds)
    except CacheFileError:
        ds.close()
        raise
    except _READ_ERRORS as e:
        ds.close()
        raise CacheFileError(f"{p} is corrupt or unreadable: {_first_line(e)}") from None
    if problem:
        ds.close()
        raise CacheFileError(f"{p} is corrupt: {problem}")
    return ds


def _checked_header(p: Path, *, read_texts: bool) -> dict[str, np.ndarray]:
    """Refuse in one line (:class:`CacheFileError`) a file that is missing, not HDF5, corrupt,
    of another schema version, incomplete or lacking required variables; its small text
    variables, read and checked against their CRC-32 (none unless ``read_texts``)."""
    if not p.exists():
        raise CacheFileError(f"no such cache file: {p}{_partial_hint(p)}")
    if not p.is_file():
        raise CacheFileError(f"not a file: {p}")
    try:
        if not h5py.is_hdf5(p):
            raise CacheFileError(f"{p} is not an HDF5 file")
        with h5py.File(p, "r") as h:
            version = h.attrs.get("schema_version")
            status = h.attrs.get("status")
            missing = [v for v in REQUIRED if v not in h]
            done = np.asarray(h["complete"][...]) if "complete" in h else None
            _check_storage(h, p)
            # text is read here, through a file closed after: read through the file xarray
            # keeps open, its heap would stay in that file's HDF5 metadata cache
            texts = {name: read_text(h, name, p) for name, dset in variables(h)
                     if read_texts and h5py.check_string_dtype(dset.dtype) is not None
                     and name not in LAZY}
    except CacheFileError:
        raise
    except _READ_ERRORS as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {_first_line(e)}") from None
    if version is None:
        raise CacheFileError(f"{p} is not a belieflens cache file (no schema_version)")
    try:
        found = int(np.asarray(version).reshape(-1)[0])
    except (TypeError, ValueError, IndexError, OverflowError):
        raise CacheFileError(f"{p} has an unreadable schema_version {version!r}") from None
    if found != SCHEMA_VERSION:
        raise CacheFileError(
            f"{p} has schema version {found}; this belieflens reads version {SCHEMA_VERSION}"
        )
    if _text(status) != "complete":
        count = "" if done is None else (
            f", {int((done == 1).sum())} of {done.size} read-outs written")
        raise CacheFileError(
            f"{p} is incomplete (status {_text(status)!r}{count}): still being written, or the "
            "extraction was stopped; rerun the same `belieflens extract` command to resume"
        )
    if missing:
        raise CacheFileError(f"{p} lacks required variables: {', '.join(missing)}")
    return texts


def cache_attrs(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The root attributes of a cache file as :func:`open_cache` gives them (``ds.attrs``),
    without opening its variables (a fraction of a second each, mostly resolving their
    dimensions): a missing, foreign, incomplete or unreadable file is refused in one line as
    :func:`open_cache` refuses it."""
    p = Path(path)
    _checked_header(p, read_texts=False)
    try:
        with h5netcdf.File(p, "r") as f:
            raw = dict(f.attrs)
    except _READ_ERRORS as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {_first_line(e)}") from None
    return {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v
            for k, v in raw.items()}


def _load_eager(ds: xr.Dataset, path: Path) -> None:
    """Load every variable of ``ds`` but the :data:`LAZY` ones into memory.

    A dask-backed ``ds`` (opened with ``chunks``) gets them from a second, unchunked opening
    of ``path``, each read whole and decoded by xarray alike: loaded through their dask
    chunks they had been one small task per chunk and variable, most of the time of opening
    a study."""
    eager = [n for n in ds.variables if n not in LAZY]
    chunked = [n for n in eager if ds.variables[n].chunks is not None]
    if chunked:
        with open_checked(path) as whole:
            for name in chunked:
                ds.variables[name].data = whole.variables[name].values
    for name in eager:
        ds.variables[name].load()


def _partial_hint(p: Path) -> str:
    partial = partial_path(p)
    if not partial.exists():
        return ""
    try:
        state = read_partial(partial)
    except CacheFileError:
        return f" (a partial file {partial.name} exists but is damaged)"
    return (
        f" (the extraction did not finish: {partial.name} holds {progress_text(state)}; "
        "rerun the same `belieflens extract` command to resume)"
    )


def _check_storage(h: h5py.File, p: Path) -> None:
    """Every dataset's storage lies inside the file, and its first and last values read."""
    size = p.stat().st_size
    for name, obj in h.items():
        if not isinstance(obj, h5py.Dataset) or obj.size == 0:
            continue
        if obj.chunks is not None:
            for i in range(obj.id.get_num_chunks()):
                info = obj.id.get_chunk_info(i)
                if info.byte_offset is None or info.byte_offset + info.size > size:
                    raise CacheFileError(f"{p} is corrupt: storage of {name!r} lies past its end")
        else:
            offset = obj.id.get_offset()
            if offset is not None and offset + obj.id.get_storage_size() > size:
                raise CacheFileError(f"{p} is corrupt: storage of {name!r} lies past its end")
        first = (0,) * obj.ndim
        last = tuple(s - 1 for s in obj.shape)
        try:
            obj[first]
            obj[last]
        except OSError as e:
            raise CacheFileError(damage_line(p, netcdf_name(name), e)) from None


def _check_values(ds: xr.Dataset) -> str:
    """The first out-of-range index or bookkeeping value, or ``''``."""
    n = ds.sizes["query"]
    if "complete" in ds.variables and not bool((ds["complete"].values == 1).all()):
        return "status is complete but not every row is marked complete"
    k = ds["n_outcome"].values if "n_outcome" in ds.variables else None
    if k is not None and (k.shape != (n,) or k.min() < 1 or k.max() > ds.sizes["outcome"]):
        return f"'n_outcome' outside [1, {ds.sizes['outcome']}]"
    limits: dict[str, tuple[int, Any]] = {
        "answer_pos": (0, ds.sizes.get("token", 0) - 1),
        "episode": (0, None), "turn": (0, None), "rotation": (0, None),
        "option_ids": (-1, None),
        "outcome": (-1, (k[:, None] - 1) if k is not None else ds.sizes["outcome"] - 1),
    }
    if "lens_token" in ds.sizes:
        limits["option_lens_index"] = (-1, ds.sizes["lens_token"] - 1)
    for name, (lo, hi) in limits.items():
        if name not in ds.variables:
            continue
        v = ds[name].values
        if v.dtype.kind not in "iu":
            return f"{name!r} is not an integer variable"
        bad = v < lo
        if hi is not None:
            bad = bad | (v > hi)
        if bool(bad.any()):
            row = int(np.argwhere(bad)[0][0])
            return f"{name!r} holds an out-of-range value at query {row}"
    return ""


def _text(v: Any) -> str:
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(-1)[0]
    if isinstance(v, bytes):
        return v.decode()
    return str(v)
