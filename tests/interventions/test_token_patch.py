"""Interventions on a token-level study of a shipped toy (``mess3-toy``): its read-outs have
one rotation that shows every outcome, and their beliefs are those rotations' own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import belieflens
from belieflens.analysis.interventions import patch_beliefs, patch_summary, patch_transfer


@pytest.fixture(scope="module")
def mess3_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tok") / "mess3.h5"
    return belieflens.extract("mess3", model="mess3-toy", episodes=12, seed=0, out=out)


@pytest.fixture(scope="module")
def mess3_patch(mess3_study: Path, tmp_path_factory: pytest.TempPathFactory) -> xr.Dataset:
    out = tmp_path_factory.mktemp("tok") / "patch.h5"
    belieflens.patch(mess3_study, out=out, model="mess3-toy",
                     options=belieflens.PatchOptions(layers=(0, 2)),
                     select=belieflens.Selection(turns=(4, 7)))
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        return ds.load()


def test_token_patch_summary_is_finite(mess3_patch: xr.Dataset) -> None:
    """A token read-out has one rotation showing every outcome: its beliefs are that
    rotation's renormalised distribution, not NaN (patch_summary was NaN throughout)."""
    beliefs = patch_beliefs(mess3_patch)
    assert beliefs.sizes["instance_pair"] == mess3_patch.sizes["pair"] > 0
    base = np.exp(mess3_patch["base_logprob"].values)
    np.testing.assert_allclose(beliefs["base"].values, base / base.sum(axis=1, keepdims=True),
                               atol=1e-12)
    summ = patch_summary(patch_transfer(mess3_patch, beliefs=beliefs))
    for var in ("transfer_mean", "tvd_source_oracle_mean"):
        assert np.isfinite(summ[var].values).all(), var
    # the whole input replaced at the embeddings: the base now answers like the source
    np.testing.assert_allclose(summ["transfer_mean"].sel(layer=0, positions="all").values, 1.0,
                               atol=1e-4)
