"""Per-chunk checksums of a cache file, and one-line refusals of damaged data.

Every numeric variable of a cache file is chunked and stored through HDF5's
Fletcher-32 filter: a 4-byte checksum per chunk that the HDF5 library itself
verifies whenever it reads the chunk (so plain h5py, h5netcdf and xarray readers
refuse a damaged chunk too, with ``OSError: ... filter returned failure during
read``). The file's metadata is written in the HDF5 1.8 format, whose superblock
and object headers carry checksums too (a damaged header raises ``incorrect
metadata checksum``); many attributes move to a fractal heap, whose blocks HDF5
does not checksum. Variable-length text (labels, prompts,
coordinates such as ``probe``) cannot pass through an HDF5 filter (its chunks hold
references into HDF5's global heap, which has no checksum): each text variable
carries the CRC-32 of each chunk of rows in its attribute ``checksum_crc32``,
checked by this module's readers (plain h5py/xarray readers do not).

This module turns a failed read into :class:`CacheFileError` with one line naming
the file, the variable and the rows of the damaged chunks:

- :func:`damage_line` re-reads a variable chunk by chunk to find those rows;
- :class:`CheckedStore` is the xarray store :func:`belieflens.open_cache` reads
  through: every lazy read (``ds["resid"].values``, dask tasks, analysis
  functions) that hits a damaged chunk raises that line instead of ``OSError``;
- :func:`check_file` reads every chunk of every variable (``info --verify``,
  ``analyze`` before it writes anything).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import xarray as xr
from xarray.backends import BackendEntrypoint, H5NetCDFStore
from xarray.backends.common import T_PathFileOrDataStore
from xarray.backends.h5netcdf_ import H5NetCDFArrayWrapper
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from belieflens.errors import CacheFileError

FILTER = "fletcher32"
"""The checksum filter every numeric variable is stored through."""

LIBVER: tuple[str, str] = ("v108", "v108")
"""HDF5 format bounds of a new file: 1.8 object headers and superblock carry checksums;
later formats (1.10+) add write-access flags to the superblock that a killed writer
leaves set, making the partial file unreadable until ``h5clear`` (no longer crash-safe)."""

_NON_COORD = "_nc4_non_coord_"
_DIM_ONLY = b"This is a netCDF dimension but not a netCDF variable"


def netcdf_name(h5name: str) -> str:
    """The netCDF (xarray) name of an HDF5 dataset (a variable named like a dimension
    is stored under a prefix)."""
    return h5name.removeprefix(_NON_COORD)


def h5_name(h: h5py.File | h5py.Group, name: str) -> str:
    """The HDF5 dataset name of netCDF variable ``name`` in ``h``."""
    hidden = _NON_COORD + name
    return hidden if hidden in h else name


def variables(h: h5py.File | h5py.Group) -> Iterator[tuple[str, h5py.Dataset]]:
    """``(netCDF name, dataset)`` of every netCDF variable of ``h`` (not bare dimensions)."""
    for key, obj in h.items():
        if not isinstance(obj, h5py.Dataset):
            continue
        label = obj.attrs.get("NAME")
        if isinstance(label, bytes) and label.startswith(_DIM_ONLY):
            continue
        yield netcdf_name(key), obj


def checksummed(dset: h5py.Dataset) -> bool:
    """Whether HDF5 verifies a checksum on every chunk of ``dset`` it reads."""
    return bool(dset.fletcher32)


TEXT_CRC_ATTR = "checksum_crc32"
"""Attribute of a text variable: the CRC-32 of each chunk of rows (HDF5 cannot filter text)."""


def text_crc(rows: np.ndarray) -> int:
    """CRC-32 of text rows (each row's strings, UTF-8 with a length prefix, in order)."""
    crc = 0
    for v in np.asarray(rows, dtype=object).reshape(-1):
        b = v.encode() if isinstance(v, str) else bytes(v)
        crc = zlib.crc32(b, zlib.crc32(len(b).to_bytes(4, "little"), crc))
    return crc


def text_crcs(dset: h5py.Dataset) -> np.ndarray:
    """The CRC-32 (:func:`text_crc`) of every chunk of rows of text dataset ``dset``."""
    step = _text_step(dset)
    n = dset.shape[0]
    return np.array([text_crc(dset[a : min(a + step, n)]) for a in range(0, n, step)],
                    dtype=np.uint32)


def _text_step(dset: h5py.Dataset) -> int:
    return int(dset.chunks[0]) if dset.chunks else max(1, int(dset.shape[0]))


def _text_spans(
    dset: h5py.Dataset, values: np.ndarray | None = None, rows: tuple[int, int] | None = None
) -> list[tuple[int, int]]:
    """Chunks of rows (within ``rows``) of a text dataset whose CRC-32 disagrees with the
    stored one (``values``: the variable's rows already read, all of them)."""
    stored = dset.attrs.get(TEXT_CRC_ATTR)
    if stored is None or dset.ndim == 0 or dset.size == 0:
        return []
    crcs = np.asarray(stored).reshape(-1)
    step = _text_step(dset)
    n = dset.shape[0]
    a, b = rows if rows is not None else (0, n)
    spans: list[tuple[int, int]] = []
    for lo in range((a // step) * step, b, step):
        hi = min(lo + step, n)
        chunk = values[lo:hi] if values is not None else dset[lo:hi]
        i = lo // step
        if i >= crcs.size or text_crc(chunk) != int(crcs[i]):
            if spans and spans[-1][1] >= lo:
                spans[-1] = (spans[-1][0], hi)
            else:
                spans.append((lo, hi))
    return spans


def damaged_spans(
    dset: h5py.Dataset, rows: tuple[int, int] | None = None
) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` along the first dimension of the chunks that fail to read.

    Reads ``dset`` chunk by chunk (rows ``rows`` only, if given); adjacent spans merge.
    A variable that is not chunked counts as one span.
    """
    if dset.size == 0:
        return []
    n = dset.shape[0] if dset.ndim else 1
    a, b = rows if rows is not None else (0, n)
    if dset.chunks is None or dset.ndim == 0:
        try:
            dset[()]
        except OSError:
            return [(0, n)]
        return []
    if TEXT_CRC_ATTR in dset.attrs:
        try:
            return _text_spans(dset, rows=(a, b))
        except OSError:
            pass  # the heap references themselves are unreadable: chunk by chunk below
    step = dset.chunks[0]
    spans: list[tuple[int, int]] = []
    for lo in range((a // step) * step, b, step):
        hi = min(lo + step, n)
        sel = (slice(lo, hi), *(slice(None),) * (dset.ndim - 1))
        for sub in dset.iter_chunks(sel):
            try:
                dset[sub]
            except OSError:
                if spans and spans[-1][1] >= lo:
                    spans[-1] = (spans[-1][0], hi)
                else:
                    spans.append((lo, hi))
                break
    return spans


def _spans_text(spans: list[tuple[int, int]], limit: int = 3) -> str:
    parts = [f"{a}\u2013{b - 1}" if b - a > 1 else str(a) for a, b in spans[:limit]]
    if len(spans) > limit:
        parts.append(f"and {len(spans) - limit} more spans")
    return ", ".join(parts)


def damage_text(h: h5py.File, name: str, spans: list[tuple[int, int]]) -> str:
    """``"variable 'resid' rows 64–127 are damaged (checksum mismatch)"`` (no file name)."""
    dset = h[h5_name(h, name)]
    what = "checksum mismatch" if checksummed(dset) or TEXT_CRC_ATTR in dset.attrs \
        else "unreadable"
    dims = _dims(h, dset)
    if dims and dims[0] == "query":
        n = sum(b - a for a, b in spans)
        noun = "row" if n == 1 else "rows"
        verb = "is" if n == 1 else "are"
        return f"variable {name!r} {noun} {_spans_text(spans)} {verb} damaged ({what})"
    return f"variable {name!r} is damaged ({what})"


def _dims(h: h5py.File, dset: h5py.Dataset) -> list[str]:
    out: list[str] = []
    for scales in dset.dims:
        names = [Path(s.name or "").name for s in scales.values()]
        out.append(netcdf_name(names[0]) if names else "")
    return out


def damage_line(path: Path, name: str, error: BaseException | None = None) -> str:
    """One line naming ``path``, variable ``name`` and its damaged rows.

    Re-reads the variable chunk by chunk; if every chunk reads (the failure was
    not in the data), the line quotes ``error`` instead.
    """
    try:
        with h5py.File(path, "r") as h:
            spans = damaged_spans(h[h5_name(h, name)])
            if spans:
                return f"{path}: {damage_text(h, name, spans)}"
    except (OSError, KeyError, ValueError, RuntimeError) as e:
        error = error or e
    detail = _first_line(error) if error is not None else "unreadable"
    return f"{path} is corrupt or unreadable: variable {name!r} ({detail})"


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:200]


def check_file(path: str | Path, budget: int = 1 << 26) -> list[str]:
    """Read every chunk of every variable of ``path``; one line (no file name) per damaged
    variable, empty if every chunk reads and passes its checksum.

    Reads blocks of whole chunks of about ``budget`` bytes, and chunk by chunk only
    in a block that fails. Raises :class:`CacheFileError` if the file cannot be opened.
    """
    p = Path(path)
    try:
        h = h5py.File(p, "r")
    except (OSError, KeyError, ValueError, RuntimeError) as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {_first_line(e)}") from None
    out: list[str] = []
    with h:
        for name, dset in variables(h):
            spans = _scan(dset, budget)
            if spans:
                out.append(damage_text(h, name, spans))
    return out


def _scan(dset: h5py.Dataset, budget: int) -> list[tuple[int, int]]:
    if dset.size == 0:
        return []
    if dset.chunks is None or dset.ndim == 0:
        return damaged_spans(dset)
    if TEXT_CRC_ATTR in dset.attrs:
        return damaged_spans(dset)
    n = dset.shape[0]
    step = dset.chunks[0]
    row_bytes = max(1, dset.size // n * dset.dtype.itemsize)
    block = max(step, budget // row_bytes // step * step)
    spans: list[tuple[int, int]] = []
    for a in range(0, n, block):
        b = min(a + block, n)
        try:
            dset[a:b]
        except OSError:
            for s in damaged_spans(dset, (a, b)):
                if spans and spans[-1][1] >= s[0]:
                    spans[-1] = (spans[-1][0], s[1])
                else:
                    spans.append(s)
    return spans


def verify_file(path: str | Path) -> None:
    """Raise :class:`CacheFileError` (one line: the file and every damaged variable with its
    rows) unless every chunk of every variable of ``path`` reads back intact."""
    lines = check_file(path)
    if lines:
        raise CacheFileError(f"{path}: " + "; ".join(lines))


@dataclass(frozen=True)
class Coverage:
    """Which variables of a file carry per-chunk checksums."""

    checked: tuple[str, ...]
    unchecked: tuple[str, ...]

    def text(self) -> str:
        """``'fletcher32 (numbers) or CRC-32 (text) per chunk on 27 of 27 variables'``, or
        ``'none (...)'``."""
        total = len(self.checked) + len(self.unchecked)
        if not self.checked:
            return "none (written before per-chunk checksums): damaged data cannot be detected"
        line = (f"{FILTER} (numbers) or CRC-32 (text) per chunk on {len(self.checked)} of "
                f"{total} variables")
        if self.unchecked:
            line += f" (not on: {', '.join(self.unchecked)})"
        return line


def coverage(path: str | Path) -> Coverage:
    """The variables of ``path`` stored with and without per-chunk checksums."""
    with h5py.File(path, "r") as h:
        checked: list[str] = []
        unchecked: list[str] = []
        for name, dset in variables(h):
            ok = checksummed(dset) or TEXT_CRC_ATTR in dset.attrs
            (checked if ok else unchecked).append(name)
    return Coverage(tuple(checked), tuple(unchecked))


class _CheckedArray(H5NetCDFArrayWrapper):
    """xarray's lazy h5netcdf array, with a failed read turned into a one-line refusal;
    text read is checked against its chunks' CRC-32 (each chunk once)."""

    def _getitem(self, key: Any) -> Any:
        base: Any = super()  # xarray's backend classes are untyped
        path = Path(str(self.datastore._filename))
        try:
            out = base._getitem(key)
        except OSError as e:
            raise CacheFileError(damage_line(path, self.variable_name, e)) from None
        if self.dtype.kind == "O" and len(self.shape) > 0:
            self._check_text(path, key)
        return out

    def _check_text(self, path: Path, key: Any) -> None:
        rows = key[0] if isinstance(key, tuple) and key else slice(None)
        n = int(self.shape[0])
        if isinstance(rows, slice):
            lo, hi, _ = rows.indices(n)
        else:
            picked = np.atleast_1d(np.asarray(rows)).astype(np.int64) % max(n, 1)
            lo, hi = (int(picked.min()), int(picked.max()) + 1) if picked.size else (0, 0)
        seen: set[int] = self.__dict__.setdefault("_seen", set())  # chunks checked
        try:
            with h5py.File(path, "r") as h:
                dset = h[h5_name(h, self.variable_name)]
                step = _text_step(dset)
                todo = [c for c in range(lo // step * step, hi, step) if c not in seen]
                if not todo:
                    return
                spans = _text_spans(dset, rows=(todo[0], todo[-1] + 1))
                text = damage_text(h, self.variable_name, spans) if spans else ""
        except OSError as e:
            raise CacheFileError(damage_line(path, self.variable_name, e)) from None
        if text:
            raise CacheFileError(f"{path}: {text}")
        seen.update(todo)


LONG_TEXT = ("prompt", "generation_log")
"""Text variables kept as Python strings (object dtype) when opened, never decoded into
fixed-width arrays: xarray decodes text into a ``<U`` array of 4 bytes times the longest
text for every row (for ``prompt``, 16 MB for 3,080 read-outs of 1,402-character prompts),
and a study's longest ``generation_log`` entry would set the width of every row.
:func:`belieflens.store.file.open_cache` leaves ``prompt`` lazy (read when used)."""


def read_text(h: h5py.File, name: str, path: Path) -> np.ndarray:
    """Every value of text variable ``name`` as Python strings (object array), checked
    against its chunks' CRC-32: a damaged chunk raises :class:`CacheFileError` (one line)."""
    dset = h[h5_name(h, name)]
    try:
        raw = np.asarray(dset[()])
        spans = _text_spans(dset, values=raw) if raw.ndim else []
    except OSError as e:
        raise CacheFileError(damage_line(path, name, e)) from None
    if spans:
        raise CacheFileError(f"{path}: {damage_text(h, name, spans)}")
    flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in raw.reshape(-1)]
    return np.array(flat, dtype=object).reshape(raw.shape)


class CheckedStore(H5NetCDFStore):
    """The h5netcdf store of xarray whose variables read through :class:`_CheckedArray`,
    text left undecoded and unread (object dtype).

    xarray decodes text variables when the file is opened, reading them through the file
    it keeps open; reading variable-length text fills that file's HDF5 metadata cache with
    the strings' heap (about 5 MB for a shard's 2,772 probe names, held as long as the file
    is open: 8 MB a shard with the other text). :func:`belieflens.store.file.open_cache`
    reads the text it needs through a file it closes instead (:func:`read_text`)."""

    def open_store_variable(self, name: str, var: Any) -> xr.Variable:
        """The variable as xarray's store gives it, reading through :class:`_CheckedArray`."""
        base: Any = super()  # xarray's backend classes are untyped
        v: xr.Variable = base.open_store_variable(name, var)
        array: Any = _CheckedArray
        data = indexing.LazilyIndexedArray(array(name, self))
        encoding = dict(v.encoding)
        if v.dtype.kind == "O":
            encoding.pop("dtype", None)  # xarray's string decoding keys on encoding["dtype"]
        return xr.Variable(v.dims, data, v.attrs, encoding)


class CheckedBackend(BackendEntrypoint):
    """An xarray engine: h5netcdf through :class:`CheckedStore` (damaged chunks refused in
    one line), e.g. ``xr.open_mfdataset(paths, engine=CheckedBackend, ...)``."""

    description = "h5netcdf, refusing damaged chunks with a one-line CacheFileError"
    open_dataset_parameters = ("filename_or_obj", "drop_variables")

    def open_dataset(
        self,
        filename_or_obj: T_PathFileOrDataStore,
        *,
        drop_variables: str | Iterable[str] | None = None,
    ) -> xr.Dataset:
        """The file as xarray's h5netcdf engine opens it, reading through
        :class:`CheckedStore`."""
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            raise TypeError("CheckedBackend opens paths only")
        store = CheckedStore.open(os.fspath(filename_or_obj), mode="r")
        base: Any = StoreBackendEntrypoint()
        ds: xr.Dataset = base.open_dataset(store, drop_variables=drop_variables)
        return ds


def open_checked(path: Path, chunks: dict[str, int] | None = None) -> xr.Dataset:
    """``xr.open_dataset(path, engine="h5netcdf")`` whose reads refuse damaged chunks in one
    line (:class:`CacheFileError`)."""
    return xr.open_dataset(path, engine=CheckedBackend, chunks=chunks)


def rechecksummed(dset: h5py.Dataset, raw: bytes) -> bytes:
    """The stored bytes of a chunk of ``dset`` whose data are the first bytes of ``raw`` (a
    chunk as stored), with its checksum computed again (by HDF5 itself, in an in-memory
    file)."""
    chunks = dset.chunks
    if chunks is None:
        raise ValueError(f"{dset.name} is not chunked")
    size = int(np.prod(chunks)) * dset.dtype.itemsize
    values = np.frombuffer(raw[:size], dtype=dset.dtype).reshape(chunks)
    with h5py.File("chunk", "w", driver="core", backing_store=False) as mem:
        tmp = mem.create_dataset("x", shape=chunks, chunks=chunks, dtype=dset.dtype,
                                 fletcher32=checksummed(dset), fillvalue=dset.fillvalue)
        tmp[...] = values
        _, out = tmp.id.read_direct_chunk((0,) * len(chunks))
        return bytes(out)
