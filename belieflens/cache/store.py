"""The cache file: HDF5 in a netCDF-compatible layout that opens as an ``xarray.Dataset``.

One row per read-out along ``query``. The writer creates every variable at its
final size, then fills it slab by slab; after each slab it marks the rows in
``complete`` and flushes, so memory stays flat and a partial file says what it
holds. The file is written under ``<out>.partial`` and renamed to ``<out>``
only when complete, so a finished path never holds a truncated file.

Variables (dims in brackets): see :data:`SCHEMA`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import xarray as xr

from belieflens.errors import CacheFileError

SCHEMA_VERSION = 1
"""Bumped whenever a variable changes meaning or shape."""

STR = "str"

SCHEMA: dict[str, tuple[tuple[str, ...], str, str]] = {
    # name: (dims, dtype, meaning)
    "resid": (("query", "layer", "d_model"), "resid",
              "residual stream at the answer position; layer 0 = embeddings, l = block l-1 out"),
    "option_logprob": (("query", "option"), "f8",
                       "log P(whole continuation of option j) in position order"),
    "answer_lse": (("query",), "f8", "logsumexp of the final logits at the answer position"),
    "input_ids": (("query", "token"), "i4", "context token ids, BOS included (-1 = pad)"),
    "answer_pos": (("query",), "i4", "index in input_ids of the last context token"),
    "option_ids": (("query", "option", "cont_token"), "i4",
                   "token ids of each option's continuation (-1 = pad)"),
    "option_lens_index": (("query", "option", "cont_token"), "i4",
                          "row of each continuation token in lens_token_id (-1 = pad)"),
    "outcome": (("query", "option"), "i4", "outcome index shown at each position (-1 = pad)"),
    "outcome_label": (("query", "outcome"), STR, "the outcome's label ('' past the probe's K)"),
    "oracle": (("query", "outcome"), "f8", "exact Bayesian distribution over outcomes (NaN: none)"),
    "n_outcome": (("query",), "i4", "number of outcomes K of the probe"),
    "prompt": (("query",), STR, "the rendered context text"),
    "complete": (("query",), "i1", "1 once the row is written"),
    "episode": (("query",), "i4", "episode index"),
    "turn": (("query",), "i4", "turn index (0 = prior)"),
    "rotation": (("query",), "i4", "Latin-square rotation"),
    "probe": (("query",), STR, "probe name"),
    "kind": (("query",), STR, "read-out kind: mcq or completion"),
    "env": (("query",), STR, "environment name"),
    "delivery": (("query",), STR, "delivery"),
    "lens_token_id": (("lens_token",), "i4", "vocabulary ids whose unembedding rows are stored"),
    "unembed": (("lens_token", "d_model"), "f4", "unembedding rows of lens_token_id"),
    "unembed_bias": (("lens_token",), "f4", "unembedding bias of lens_token_id"),
    "final_norm_gain": (("d_model",), "f8", "effective per-dimension gain of the final norm"),
    "final_norm_bias": (("d_model",), "f8", "effective bias of the final norm"),
    "logprobs": (("query", "vocab"), "f4", "full next-token log-probs at the answer position"),
    "cont_resid": (("query", "option", "cont_extra", "layer", "d_model"), "resid",
                   "residual at continuation token i of each option's own row (predicts token "
                   "i+1); only with --cont-resid, NaN where the option is shorter"),
}

COORDS = ("episode", "turn", "rotation", "probe", "kind", "env", "delivery")
"""Per-query coordinates."""

REQUIRED = (
    "resid", "option_logprob", "input_ids", "answer_pos", "option_ids", "outcome",
    "outcome_label", "oracle", *COORDS[:4], "env", "delivery",
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


def partial_path(out: Path) -> Path:
    """Where a file is written until it is complete."""
    return out.with_name(out.name + ".partial")


class CacheWriter:
    """Streams read-outs into a cache file slab by slab (one open file, flat memory)."""

    def __init__(
        self,
        out: Path,
        sizes: Sizes,
        attrs: Mapping[str, Any],
        *,
        resid_dtype: str = "float32",
        chunk_rows: int = 64,
        extra: Mapping[str, tuple[tuple[str, ...], str, str]] | None = None,
    ) -> None:
        import h5netcdf

        self.out = out
        self.path = partial_path(out)
        self.sizes = sizes
        self._f = h5netcdf.File(self.path, "w")
        f = self._f
        for dim, n in vars(sizes).items():
            if n > 0:
                f.dimensions[dim] = n
        for name, (dims, dtype, meaning) in {**SCHEMA, **(extra or {})}.items():
            if any(getattr(sizes, d) == 0 for d in dims):
                continue
            if dtype == STR:
                h5dtype: Any = h5py.string_dtype()
                fill: Any = None
            elif dtype == "resid":
                h5dtype = np.dtype(resid_dtype)
                fill = np.nan
            else:
                h5dtype = np.dtype(dtype)
                # integers keep HDF5's default fill (0) and no _FillValue, so xarray keeps
                # them integer; padding is written explicitly as -1
                fill = np.nan if h5dtype.kind == "f" else None
            chunks = None
            if dims[0] == "query":
                shape = [getattr(sizes, d) for d in dims]
                shape[0] = min(chunk_rows, shape[0])
                chunks = tuple(shape)
            kwargs: dict[str, Any] = {"chunks": chunks}
            if fill is not None:
                kwargs["fillvalue"] = fill
            var = f.create_variable(name, dims, dtype=h5dtype, **kwargs)
            var.attrs["description"] = meaning
            if dims[0] == "query" and name not in COORDS:
                var.attrs["coordinates"] = " ".join(COORDS)
        for k, v in attrs.items():
            f.attrs[k] = _attr(v)
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["status"] = "writing"
        f.flush()

    def write_static(self, values: Mapping[str, np.ndarray]) -> None:
        """Write variables without a ``query`` dimension (lens parameters)."""
        for name, arr in values.items():
            self._f.variables[name][...] = arr

    def write_rows(self, start: int, values: Mapping[str, np.ndarray]) -> None:
        """Write rows ``start:start+n`` of per-query variables, then mark them complete."""
        n = -1
        for name, arr in values.items():
            var = self._f.variables[name]
            n = arr.shape[0]
            if arr.ndim > 1:
                index = (slice(start, start + n), *tuple(slice(0, s) for s in arr.shape[1:]))
                var[index] = arr
            else:
                var[start : start + n] = arr
        if n > 0:
            self._f.variables["complete"][start : start + n] = 1
        self._f.flush()

    def close(self, *, complete: bool) -> Path:
        """Close; if ``complete``, mark the file complete and move it to its final path."""
        if complete:
            self._f.attrs["status"] = "complete"
        self._f.close()
        if complete:
            os.replace(self.path, self.out)
            return self.out
        return self.path


def _attr(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    return v


def open_cache(
    path: str | os.PathLike[str], *, chunks: Mapping[str, int] | None = None
) -> xr.Dataset:
    """Open a cache file as an ``xarray.Dataset`` (lazy: values load on access).

    Raises :class:`CacheFileError` with one line if the file is missing, not HDF5,
    incomplete, of another schema version, or lacks required variables.
    """
    p = Path(path)
    if not p.exists():
        partial = partial_path(p)
        hint = f" (a partial file {partial.name} exists: the extraction did not finish)" if (
            partial.exists()) else ""
        raise CacheFileError(f"no such cache file: {p}{hint}")
    if not p.is_file():
        raise CacheFileError(f"not a file: {p}")
    try:
        if not h5py.is_hdf5(p):
            raise CacheFileError(f"{p} is not an HDF5 file")
        with h5py.File(p, "r") as h:
            version = h.attrs.get("schema_version")
            status = h.attrs.get("status")
            missing = [v for v in REQUIRED if v not in h]
    except CacheFileError:
        raise
    except (OSError, KeyError, ValueError, RuntimeError) as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {str(e).splitlines()[0]}") from None
    if version is None:
        raise CacheFileError(f"{p} is not a belieflens cache file (no schema_version)")
    try:
        found = int(np.asarray(version).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        raise CacheFileError(f"{p} has an unreadable schema_version {version!r}") from None
    if found != SCHEMA_VERSION:
        raise CacheFileError(
            f"{p} has schema version {found}; this belieflens reads version {SCHEMA_VERSION}"
        )
    if _text(status) != "complete":
        raise CacheFileError(f"{p} is incomplete (status {_text(status)!r}): still being written?")
    if missing:
        raise CacheFileError(f"{p} lacks required variables: {', '.join(missing)}")
    try:
        ds = xr.open_dataset(p, engine="h5netcdf", chunks=dict(chunks) if chunks else None)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {str(e).splitlines()[0]}") from None
    return ds


def _text(v: Any) -> str:
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(-1)[0]
    if isinstance(v, bytes):
        return v.decode()
    return str(v)
