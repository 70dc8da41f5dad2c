"""Steering on the tiny random model: α = 0 changes nothing; directions are unit and fitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from belieflens.interventions.readouts import Selection, read_study
from belieflens.interventions.steer import SteerOptions, evidence_end, steer_logprobs


@pytest.fixture(scope="module")
def steered(tiny_model: Any, tiny_study: Path) -> xr.Dataset:
    study = read_study(tiny_study)
    rows = Selection(turns=(1, 2)).rows(study)
    # 4 folds of the 4 episodes: the decoder's nested CV then chooses each outer fold's
    # penalty over 3 inner folds (with 3 outer folds one inner split has 2, too few to be
    # stable on so little data)
    return steer_logprobs(tiny_model, study, rows,
                          SteerOptions(alphas=(-2.0, 0.0, 2.0), n_folds=4, batch_size=16))


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


def test_directions_are_unit_and_the_decoder_reads_the_concept(steered: xr.Dataset) -> None:
    np.testing.assert_allclose(np.linalg.norm(steered["control_direction"].values, axis=1), 1.0)
    # layer 0 is the answer token's embedding, the same in every read-out: no direction
    norms = np.linalg.norm(steered["direction"].values, axis=1)
    np.testing.assert_allclose(norms, [0.0, 1.0, 1.0], atol=1e-9)
    assert steered["steered_logprob"].dims == ("query", "layer", "alpha", "option")
    assert float(steered["decoder_r2"].sel(layer=2)) > 0.5
    assert (steered["resid_std"].sel(layer=[1, 2]).values > 0).all()


@pytest.fixture(scope="module")
def after_evidence(tiny_model: Any, tiny_study: Path) -> xr.Dataset:
    study = read_study(tiny_study)
    rows = Selection(turns=(1, 2)).rows(study)
    return steer_logprobs(tiny_model, study, rows,
                          SteerOptions(alphas=(-2.0, 0.0, 2.0), n_folds=4, batch_size=16,
                                       at="after-evidence"))


def test_evidence_ends_where_episodes_stop_differing(tiny_study: Path) -> None:
    study = read_study(tiny_study)
    rows = Selection(turns=(1, 2)).rows(study)
    ends = evidence_end(study, rows)
    t = study.table
    for q, end in zip(rows, ends, strict=True):
        ids = np.asarray(study.queries[q].context_ids)
        assert 0 < end < ids.size - 1  # the question and the answer position follow it
        peers = [p for p in range(study.n_query)
                 if all(t[k].values[p] == t[k].values[q]
                        for k in ("turn", "delivery", "probe", "rotation"))
                 and t["episode"].values[p] != t["episode"].values[q]
                 and len(study.queries[p].context_ids) == ids.size]
        tails = {tuple(study.queries[p].context_ids[end + 1:]) for p in peers}
        assert tails == {tuple(ids[end + 1:])}  # everything after it is shared
        assert any(study.queries[p].context_ids[end] != ids[end] for p in peers)


def test_after_evidence_alpha_zero_changes_nothing_and_last_layer_equals_answer(
    after_evidence: xr.Dataset, steered: xr.Dataset
) -> None:
    assert after_evidence.attrs["at"] == "after-evidence"
    clean = after_evidence["clean_logprob"].values[:, None, :]
    got = after_evidence["steered_logprob"].sel(alpha=0.0).values
    np.testing.assert_allclose(got, np.broadcast_to(clean, got.shape), atol=1e-5)
    # at the last layer no block runs: only the answer position is read, as with at="answer"
    last = int(after_evidence["layer"].values[-1])
    np.testing.assert_allclose(after_evidence["steered_logprob"].sel(layer=last).values,
                               steered["steered_logprob"].sel(layer=last).values, atol=1e-5)
    # below it, steering the question's positions too changes what the answer reads
    diff = abs(after_evidence["steered_logprob"].sel(layer=1, alpha=2.0)
               - steered["steered_logprob"].sel(layer=1, alpha=2.0))
    assert float(diff.max()) > 1e-5


def test_after_evidence_needs_another_episode(tiny_study: Path) -> None:
    """A study whose other episodes show the same tokens as read-out q: q's evidence cannot
    be located, and that is one line, not a guess."""
    import dataclasses

    from belieflens.errors import ParameterError

    study = read_study(tiny_study)
    q = int(Selection(turns=(1,), episodes=(0,)).rows(study)[0])
    same = tuple(study.queries[q] if study.table["episode"].values[p] != 0 else study.queries[p]
                 for p in range(study.n_query))
    with pytest.raises(ParameterError, match="evidence cannot be located"):
        evidence_end(dataclasses.replace(study, queries=same), np.array([q]))


@pytest.fixture(scope="module")
def diff_means(tiny_model: Any, tiny_study: Path) -> xr.Dataset:
    study = read_study(tiny_study)
    rows = Selection(turns=(1, 2)).rows(study)
    return steer_logprobs(tiny_model, study, rows,
                          SteerOptions(alphas=(0.0, 2.0), n_folds=2, batch_size=16,
                                       direction="diff-means"))


def test_directions_are_cross_fitted_by_episode(steered: xr.Dataset, diff_means: xr.Dataset,
                                                tiny_study: Path) -> None:
    """A read-out is steered along a direction fitted without its episode's read-outs
    (issue 31: the direction was fitted on the very rows it steered)."""
    from belieflens.interventions.directions import diff_means_direction
    from belieflens.interventions.readouts import oracle_mean, study_resid

    for ds in (steered, diff_means):
        fold = ds["query_fold"].values
        episodes = ds["episode"].values
        for e in np.unique(episodes):  # an episode's read-outs share one fold
            assert np.unique(fold[episodes == e]).size == 1
        assert np.unique(fold).size == ds.sizes["fold"] >= 2
        units = ds["fold_direction"].sel(layer=2).values
        np.testing.assert_allclose(np.linalg.norm(units, axis=1), 1.0)
    # the diff-of-means direction of fold k is the other folds' difference of means
    study = read_study(tiny_study)
    rows = diff_means["study_query"].values
    fold = diff_means["query_fold"].values
    target = oracle_mean(study.table)[rows]
    x = study_resid(study, [2], list(rows))[:, 0, :]
    for k in range(diff_means.sizes["fold"]):
        train = (fold != k) & np.isfinite(target)
        want = diff_means_direction(x[train], target[train])
        np.testing.assert_allclose(diff_means["fold_direction"].sel(layer=2).values[k],
                                   want.unit, atol=1e-9)
        assert float(diff_means["fold_resid_std"].sel(layer=2).values[k]) == \
            pytest.approx(want.scale)
        full = diff_means_direction(x[np.isfinite(target)], target[np.isfinite(target)])
        assert not np.allclose(want.unit, full.unit)  # not the direction of all the rows
    assert diff_means.attrs["direction_kind"] == "diff-means"
    got = diff_means["steered_logprob"].sel(alpha=0.0).values
    clean = diff_means["clean_logprob"].values[:, None, :]
    np.testing.assert_allclose(got, np.broadcast_to(clean, got.shape), atol=1e-5)
    assert float(abs(diff_means["steered_logprob"].sel(alpha=2.0, layer=2)
                     - diff_means["clean_logprob"]).max()) > 1e-4


def test_cross_fitting_needs_two_episodes(tiny_model: Any, tiny_study: Path) -> None:
    from belieflens.errors import ParameterError

    study = read_study(tiny_study)
    rows = Selection(turns=(1, 2), episodes=(0,)).rows(study)
    with pytest.raises(ParameterError, match="at least 2 episodes"):
        steer_logprobs(tiny_model, study, rows, SteerOptions(alphas=(0.0,), n_folds=2))
    with pytest.raises(ParameterError, match="--direction"):
        SteerOptions(direction="pca")  # type: ignore[arg-type]
