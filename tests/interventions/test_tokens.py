"""Interventions on a token-level study of a shipped toy (``mess3-toy``): its read-outs have
one rotation that shows every outcome, and their beliefs are those rotations' own; the belief
check compares the edited output with the oracle's prediction for the implied belief."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import belieflens
from belieflens.analysis.belief_check import (
    patch_belief_check,
    project_simplex,
    steer_belief_check,
)
from belieflens.analysis.decoders.estimator import ridge_heldout, ridge_map
from belieflens.analysis.interventions import patch_beliefs, patch_summary, patch_transfer
from belieflens.errors import ParameterError
from belieflens.interventions.directions import belief_direction, episode_folds
from belieflens.interventions.readouts import read_study
from belieflens.report.interventions import report


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


def test_patched_output_follows_the_patched_belief(mess3_patch: xr.Dataset) -> None:
    """At layer 2 the answer position's residual carries the source's belief: the patched
    output lands near the oracle's prediction for it, far from where the base's output was."""
    assert mess3_patch["state_emission"].dims == ("state", "outcome")
    assert mess3_patch.attrs["emission_max_error"] < 1e-8  # mess3: oracle = belief @ E
    check = patch_belief_check(mess3_patch)
    assert check["tvd_edited_mean"].dims == ("layer", "positions")
    s = check.sel(layer=2, positions="all")
    assert float(s.tvd_edited_mean) < 0.05 < float(s.tvd_unedited_mean)
    assert float(s.follow) > 0.7


@pytest.fixture(scope="module")
def mess3_steer(mess3_study: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tok") / "steer.h5"
    return belieflens.steer(mess3_study, out=out, model="mess3-toy",
                            options=belieflens.SteerOptions(layers=(2,), alphas=(-2.0, 0.0, 2.0),
                                                            n_folds=3, direction="belief",
                                                            state=1))


def test_steered_output_follows_the_steered_belief(mess3_steer: Path, tmp_path: Path) -> None:
    with xr.open_dataset(mess3_steer, engine="h5netcdf") as ds:
        check = steer_belief_check(ds.load())
    assert check["tvd_edited_mean"].dims == ("layer", "alpha")
    at0 = check.sel(layer=2, alpha=0.0)
    assert float(at0.tvd_predicted_move_mean) < 1e-12
    for a in (-2.0, 2.0):
        s = check.sel(layer=2, alpha=a)
        assert float(s.tvd_predicted_move_mean) > 0.1  # the read moves ...
        assert float(s.follow) > 0.4  # ... and the output goes most of the way with it
        assert float(s.follow) > float(s.control_follow) + 0.3
    text = report(mess3_steer, tmp_path / "rep").text
    assert "belief check" in text and "follow" in text
    assert "belief map penalty" in text and "layer 2 " in text


def test_belief_direction_moves_the_read_toward_the_state() -> None:
    rng = np.random.default_rng(0)
    b = rng.dirichlet(np.ones(3), size=400)
    x = b @ rng.standard_normal((3, 8)) + 0.01 * rng.standard_normal((400, 8))
    groups = np.arange(400) // 4
    for decoder in (False, True):
        d = belief_direction(x, b, 2, groups, rng, n_folds=3, decoder=decoder)
        assert d.r2 > 0.99 and abs(float(np.linalg.norm(d.unit)) - 1.0) < 1e-12
        coef = np.linalg.lstsq(np.c_[x, np.ones(400)], b, rcond=None)[0][:-1]
        move = d.unit @ coef
        assert move[2] > 0 > max(move[0], move[1])
    with pytest.raises(ParameterError, match="--state = 3"):
        belief_direction(x, b, 3, groups, rng)


def test_belief_direction_reports_the_estimators_lambda_and_nested_r2() -> None:
    """The map's λ is the one estimator's over the episode folds, and r2 its nested-CV R² on
    the same folds (not a fit at a fixed penalty)."""
    rng = np.random.default_rng(3)
    b = rng.dirichlet(np.ones(3), size=240)
    x = b @ rng.standard_normal((3, 40)) + 0.3 * rng.standard_normal((240, 40))
    groups = np.arange(240) // 6
    d = belief_direction(x, b, 0, groups, np.random.default_rng(7), n_folds=4, decoder=True)
    folds, k = episode_folds(groups, 4, np.random.default_rng(7))
    assert k == 4 and d.lam == ridge_map(x, b, folds).lam
    assert d.r2 == ridge_heldout(x, b, folds).r2


def test_belief_direction_needs_a_token_level_study(tiny_study: Path, mess3_study: Path
                                                    ) -> None:
    options = belieflens.SteerOptions(direction="belief", n_folds=2)
    with pytest.raises(ParameterError, match="no belief_state"):
        options.plan(read_study(tiny_study), belieflens.Selection())
    with pytest.raises(ParameterError, match=r"--state = 3 is not allowed.*0\.\.2"):
        belieflens.SteerOptions(direction="belief", state=3).plan(read_study(mess3_study),
                                                                   belieflens.Selection())


def test_project_simplex() -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(size=(50, 4)) * 2
    p = project_simplex(v)
    assert np.all(p >= 0) and np.allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(project_simplex(p), p, atol=1e-12)
    # no other point of the simplex is closer than the projection
    other = rng.dirichlet(np.ones(4), size=50)
    assert np.all(((v - p) ** 2).sum(axis=1) <= ((v - other) ** 2).sum(axis=1) + 1e-12)
