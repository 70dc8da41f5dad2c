"""Steering on the tiny random model: α = 0 changes nothing; directions are unit and fitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from belieflens.interventions.steer import Selection, SteerOptions, steer_logprobs
from belieflens.interventions.study import read_study


@pytest.fixture(scope="module")
def steered(tiny_model: Any, tiny_study: Path) -> xr.Dataset:
    study = read_study(tiny_study)
    rows = Selection(turns=(1, 2)).rows(study)
    return steer_logprobs(tiny_model, study, rows,
                          SteerOptions(alphas=(-2.0, 0.0, 2.0), n_folds=3, batch_size=16))


def test_alpha_zero_changes_nothing(steered: xr.Dataset) -> None:
    clean = steered["clean_logprob"].values[:, None, :]
    for var in ("steered_logprob", "control_logprob"):
        got = steered[var].sel(alpha=0.0).values
        np.testing.assert_allclose(got, np.broadcast_to(clean, got.shape), atol=1e-5)
    np.testing.assert_allclose(steered["clean_logprob"].values,
                               steered["study_option_logprob"].values, atol=1e-4)


def test_steering_moves_the_output(steered: xr.Dataset) -> None:
    moved = abs(steered["steered_logprob"].sel(alpha=2.0) - steered["clean_logprob"])
    assert float(moved.sel(layer=2).max()) > 1e-4


def test_directions_are_unit_and_the_probe_reads_the_concept(steered: xr.Dataset) -> None:
    np.testing.assert_allclose(np.linalg.norm(steered["control_direction"].values, axis=1), 1.0)
    # layer 0 is the answer token's embedding, the same in every read-out: no direction
    norms = np.linalg.norm(steered["direction"].values, axis=1)
    np.testing.assert_allclose(norms, [0.0, 1.0, 1.0], atol=1e-9)
    assert steered["steered_logprob"].dims == ("query", "layer", "alpha", "option")
    assert float(steered["probe_r2"].sel(layer=2)) > 0.5
    assert (steered["resid_std"].sel(layer=[1, 2]).values > 0).all()
