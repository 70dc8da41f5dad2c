"""Intervention result files, read side: which kind a file is, and opening one checked.

A result file (written by :mod:`belieflens.interventions`) is HDF5 in a netCDF layout that
opens with plain xarray; its root attribute ``kind`` says which intervention wrote it
(:data:`KINDS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

import numpy as np
import xarray as xr

from belieflens.errors import CacheFileError

Kind = Literal["intervention-patch", "intervention-steer", "intervention-erase"]
"""The ``kind`` attribute of a result file."""

KINDS: tuple[Kind, ...] = get_args(Kind)
KIND_ATTR = "kind"

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
    """Whether ``path`` is an intervention result file (its ``kind`` is one of :data:`KINDS`)."""
    return result_kind(path) in KINDS


def open_result(path: str | Path, kind: Kind | None = None) -> xr.Dataset:
    """Open a result file (loaded in memory), or one line if it is not one (of ``kind``).

    Variables under a former name (:data:`FORMER_NAMES`) are renamed to the current one."""
    p = Path(path)
    if not p.is_file():
        raise CacheFileError(f"no such result file: {p}")
    found = result_kind(p)
    if found not in KINDS or (kind is not None and found != kind):
        want = kind or "an intervention result"
        raise CacheFileError(f"{p} is not {want} file (kind {found!r})")
    try:
        with xr.open_dataset(p, engine="h5netcdf") as ds:
            loaded = ds.load()
    except (OSError, ValueError, KeyError) as e:
        raise CacheFileError(f"{p} is corrupt or unreadable: {str(e).splitlines()[0]}") from None
    return loaded.rename_vars({old: new for old, new in FORMER_NAMES.items()
                               if old in loaded.variables and new not in loaded.variables})
