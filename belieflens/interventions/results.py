"""Intervention result files, write side: HDF5 (netCDF layout) that opens with plain xarray.

``xr.open_dataset(path, engine="h5netcdf")`` reads one without belieflens. The root
attribute ``kind`` says which intervention wrote it (:mod:`belieflens.store.results` reads
it); ``study_fingerprint``, ``study_path`` and the model's provenance (``model_id``,
``model_spec``, ``weights_hash``, ``dtype``, ``device``) say what it was computed from. A
file is written under a temporary name and renamed once whole, so a finished path never
holds a truncated file; every numeric array carries an HDF5 Fletcher-32 checksum, so a
damaged chunk fails to read instead of returning wrong numbers.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xarray as xr

from belieflens.errors import ParameterError
from belieflens.interventions.readouts import StudyReadouts
from belieflens.model.load import LoadedModel
from belieflens.store import space
from belieflens.store.provenance import git_commit
from belieflens.store.results import KIND_ATTR


def check_out(out: Path, overwrite: bool) -> None:
    """``out`` may be written (a new file in an existing folder, unless ``overwrite``);
    else one line."""
    if out.is_dir():
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it is a directory")
    if out.exists() and not overwrite:
        raise ParameterError(f"{out} exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {out.parent} does not exist"
        )


def provenance(kind: str, study: StudyReadouts, model: LoadedModel, options: Mapping[str, Any]
               ) -> dict[str, Any]:
    """Root attributes of a result file: what it is, from which study and model, how."""
    try:
        version = importlib.metadata.version("belieflens")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    info = model.info
    attrs: dict[str, Any] = {
        KIND_ATTR: kind,
        "study_fingerprint": study.fingerprint,
        "study_path": str(study.path.resolve()),
        "study_env_name": str(study.attrs.get("env_name", "")),
        "study_env_params": str(study.attrs.get("env_params", "")),
        "model_id": info.official_id,
        "model_spec": info.spec,
        "model_source": info.source,
        "weights_hash": info.weights_hash,
        "dtype": info.dtype,
        "device": info.device,
        "n_layers": info.n_layers,
        "belieflens_version": version,
        "git_commit": git_commit(),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    for k, v in options.items():
        attrs[f"option_{k}"] = v
    return attrs


def attr_value(v: Any) -> Any:
    """``v`` as an HDF5 attribute holds it: a bool as 0/1, ``None`` as "", a sequence as
    comma-separated text."""
    if isinstance(v, bool):
        return int(v)
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return v


RESULT_METADATA_BYTES = 1 << 20
"""What :func:`write_result`'s space check allows besides the Dataset's own bytes (HDF5's
headers, attributes and the text's heap)."""


def write_result(ds: xr.Dataset, out: Path) -> Path:
    """Write ``ds`` to ``out`` (atomically: a temporary file renamed once whole).

    The free space is checked first (the Dataset's bytes and :data:`RESULT_METADATA_BYTES`:
    one :class:`~belieflens.errors.StorageError` line if short, nothing written); a full
    disk or an I/O error while writing removes the temporary file and is one line too.
    """
    tmp = out.with_name(out.name + ".tmp")
    tmp.unlink(missing_ok=True)
    space.require(out, int(ds.nbytes) + RESULT_METADATA_BYTES)
    ds = ds.copy()
    ds.attrs = {k: attr_value(v) for k, v in ds.attrs.items()}
    for name in ds.variables:
        if ds[name].dtype == object or ds[name].dtype.kind == "U":
            ds[name] = ds[name].astype(str).astype(object)
    # every numeric array carries an HDF5 Fletcher-32 checksum, verified by h5py on read
    encoding = {str(k): {"fletcher32": True, "chunksizes": v.shape}
                for k, v in ds.variables.items()
                if v.dtype.kind in "fiub" and v.ndim and v.size and k not in ds.indexes}
    try:
        ds.to_netcdf(tmp, engine="h5netcdf", invalid_netcdf=True, encoding=encoding)
        os.replace(tmp, out)
    except Exception as e:
        kind = space.fault(e)
        if kind is None:
            raise
        raise space.fault_error(kind, out, f"while writing {out}",
                                "rerun the same command") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out
