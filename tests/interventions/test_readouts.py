"""The study file an intervention reads: residuals read through h5py equal xarray's reading of
the same selection, in any order and with repeats, and a damaged chunk is refused in one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from belieflens.errors import CacheFileError
from belieflens.interventions.readouts import StudyReadouts, read_study, study_resid


@pytest.fixture(scope="module")
def read(tiny_study: Path) -> tuple[StudyReadouts, np.ndarray]:
    """The study as interventions read it, and its residuals as xarray reads them."""
    with xr.open_dataset(tiny_study, engine="h5netcdf") as ds:
        resid = np.asarray(ds["resid"].values, dtype=np.float64)
    return read_study(tiny_study), resid


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_study_resid_equals_the_dataset_selection(read: tuple[StudyReadouts, np.ndarray],
                                                  data: st.DataObject) -> None:
    study, resid = read
    n_query, n_layer = resid.shape[:2]
    layers = data.draw(st.lists(st.integers(0, n_layer - 1), min_size=1, max_size=4))
    rows = data.draw(st.none() | st.lists(st.integers(0, n_query - 1), max_size=n_query + 3))
    got = study_resid(study, layers, rows)
    expected = resid[:, layers] if rows is None else resid[rows][:, layers]
    assert got.dtype == np.float64 and got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=True)


def test_damaged_residuals_are_refused_in_one_line(tiny_study: Path, tmp_path: Path) -> None:
    from tests.store.test_checksums import _damage

    bad = tmp_path / "bad.h5"
    _damage(tiny_study, bad, "resid", 0)
    study = read_study(tiny_study)
    moved = dataclasses.replace(study, path=bad)
    with pytest.raises(CacheFileError) as e:
        study_resid(moved, [0])
    assert str(e.value).startswith(f"{bad}: variable 'resid' rows 0")
    assert "damaged (checksum mismatch)" in str(e.value) and "\n" not in str(e.value)
