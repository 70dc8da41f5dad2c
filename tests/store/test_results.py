"""Intervention result files, read side: the kind check and variables under older names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from belieflens.errors import CacheFileError
from belieflens.store.results import FORMER_NAMES, is_result, open_result, result_kind


def _write(path: Path, names: list[str], kind: str = "intervention-erase") -> Path:
    ds = xr.Dataset({n: ("layer", np.array([0.25, 0.5])) for n in names},
                    coords={"layer": [0, 1]}, attrs={"kind": kind})
    ds.to_netcdf(path, engine="h5netcdf")
    return path


def test_a_file_with_the_older_names_reads_under_the_current_ones(tmp_path: Path) -> None:
    old = _write(tmp_path / "old.h5", list(FORMER_NAMES))
    ds = open_result(old)
    assert set(FORMER_NAMES.values()) <= set(ds.data_vars)
    assert not set(FORMER_NAMES) & set(ds.data_vars)
    np.testing.assert_array_equal(ds["decoder_r2_clean"].values, [0.25, 0.5])


def test_a_file_with_the_current_names_reads_unchanged(tmp_path: Path) -> None:
    new = _write(tmp_path / "new.h5", ["decoder_r2", "decoder_lam"], "intervention-steer")
    assert is_result(new) and result_kind(new) == "intervention-steer"
    assert sorted(map(str, open_result(new).data_vars)) == ["decoder_lam", "decoder_r2"]


def test_a_file_of_another_kind_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "other.h5", ["decoder_r2"], "intervention-steer")
    with pytest.raises(CacheFileError, match="is not intervention-erase file"):
        open_result(path, "intervention-erase")
