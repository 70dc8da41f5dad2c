"""Intervention result files, read side: which kind a file is, and opening one checked.

A result file (written by :mod:`belieflens.interventions`) is HDF5 in a netCDF layout that
opens with plain xarray; its root attribute ``kind`` says which intervention wrote it: a name
that starts with :data:`KIND_PREFIX`, which the intervention registers with its report
(:mod:`belieflens.report.interventions`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.errors import CacheFileError

KIND_ATTR = "kind"
"""The root attribute that names the intervention a result file holds."""

KIND_PREFIX = "intervention-"
"""How every intervention's ``kind`` begins: the mark of a result file."""

FORMER_NAMES: dict[str, str] = {
    "probe_r2": "decoder_r2",
    "probe_lam": "decoder_lam",
    "probe_r2_clean": "decoder_r2_clean",
    "probe_r2_erased": "decoder_r2_erased",
}
"""Result-file variables under their older names (``probe`` for a decoder), each with the name
:func:`open_result` reads it as."""


def result_kind(path: str | Path) -> str:
    """The ``kind`` attribute of a file (``''`` for a study file or any other file)."""
    import h5py

    p = Path(path)
    try:
        with h5py.File(p, "r") as h:
            v = h.attrs.get(KIND_ATTR, "")
    except (OSError, ValueError, KeyError):  # not HDF5, or damaged: not a result file
        return ""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray):
        return str(v.reshape(-1)[0]) if v.size else ""
    return str(v)


def is_result(path: str | Path) -> bool:
    """Whether ``path`` is an intervention result file (its ``kind`` starts with
    :data:`KIND_PREFIX`)."""
    return result_kind(path).startswith(KIND_PREFIX)


def open_result(path: str | Path, kind: str | None = None) -> xr.Dataset:
    """Open a result file (loaded in memory), or one line if it is not one (of ``kind``).

    Variables under a former name (:data:`FORMER_NAMES`) are renamed to the current one."""
    p = Path(path)
    if not p.is_file():
        raise CacheFileError(f"no such result file: {p}")
    found = result_kind(p)
    if not found.startswith(KIND_PREFIX) or (kind is not None and found != kind):
        want = kind or "an intervention result"
        raise CacheFileError(f"{p} is not {want} file (kind {found!r})")
    try:
        with xr.open_dataset(p, engine="h5netcdf") as ds:
            loaded = ds.load()
    except (OSError, ValueError, KeyError) as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {str(e).splitlines()[0]}") from None
    return loaded.rename_vars({old: new for old, new in FORMER_NAMES.items()
                               if old in loaded.variables and new not in loaded.variables})
