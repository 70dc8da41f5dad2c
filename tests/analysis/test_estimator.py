"""The one ridge estimator: λ chosen inside the training folds (a fixed small λ overfits where
nested CV does not), permutation nulls with a p-value, and episode sums that give the R² of
any resample of episodes exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belieflens.analysis.decoders.estimator import (
    FALLBACK_LAM,
    episode_sums,
    null_targets,
    ridge_heldout,
    ridge_map,
)
from belieflens.analysis.decoders.folds import group_folds


def _overfit_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """60 episodes of 3 rows, 150 features, a target in 2 of them under heavy noise: with
    four fifths of the episodes (144 rows) a near-unpenalised fit interpolates noise."""
    rng = np.random.default_rng(seed)
    episodes = np.repeat(np.arange(60), 3)
    x = rng.normal(size=(episodes.size, 150))
    y = x[:, :2] @ np.array([[1.0], [-0.5]]) + 1.0 * rng.normal(size=(episodes.size, 1))
    return x, y, episodes


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    return float(1 - ((y - pred) ** 2).sum() / ((y - y.mean(0)) ** 2).sum())


def test_a_fixed_small_lambda_overfits_and_nested_cv_does_not() -> None:
    x, y, episodes = _overfit_data()
    folds = group_folds(episodes, 5, np.random.default_rng(0))
    fixed = ridge_heldout(x, y, folds, lambdas=(1e-6,))
    nested = ridge_heldout(x, y, folds)
    assert fixed.r2 < 0.0  # the fixed small penalty fits the noise
    assert nested.r2 > 0.3 and nested.r2 > fixed.r2 + 0.3
    assert np.all(nested.lam > 1e-3)  # a real penalty was chosen in every fold
    assert nested.r2 == pytest.approx(_r2(y, nested.pred), abs=1e-9)


def test_lambda_is_chosen_inside_the_training_folds_only() -> None:
    x, y, episodes = _overfit_data(1)
    folds = group_folds(episodes, 5, np.random.default_rng(0))
    base = ridge_heldout(x, y, folds)
    for k in range(5):
        garbled = y.copy()
        rows = folds == k
        garbled[rows] = np.random.default_rng(k).normal(scale=100.0, size=(rows.sum(), 1))
        again = ridge_heldout(x, garbled, folds)
        assert again.lam[k] == base.lam[k]  # the test fold's targets do not move its λ
        assert np.allclose(again.pred[rows], base.pred[rows])  # nor its predictions


def test_ridge_map_beats_a_fixed_small_lambda_on_unseen_episodes() -> None:
    """Fitted on four fifths of the episodes, the map whose λ is cross-validated over their
    own folds predicts the last fifth far better than the same map at a fixed small λ."""
    x, y, episodes = _overfit_data(2)
    folds = group_folds(episodes, 5, np.random.default_rng(0))
    for k in range(5):
        train, test = folds != k, folds == k
        fixed = ridge_map(x[train], y[train], folds[train], lambdas=(1e-6,))
        cv = ridge_map(x[train], y[train], folds[train])
        assert cv.cv and cv.lam > 1e-3 and fixed.lam == 1e-6
        mse_fixed = float(np.mean((y[test] - fixed(x[test])) ** 2))
        mse_cv = float(np.mean((y[test] - cv(x[test])) ** 2))
        assert mse_cv < 0.7 * mse_fixed


def test_ridge_map_is_ridge_heldouts_fit_of_the_outer_fold() -> None:
    """On an outer fold's training rows, with the other outer folds as its folds, the map is
    the fit ridge_heldout makes for that fold: the same λ and the same predictions; so the
    held-out rows never take part in choosing it."""
    x, y, episodes = _overfit_data(3)
    folds = group_folds(episodes, 5, np.random.default_rng(1))
    nested = ridge_heldout(x, y, folds)
    for k in range(5):
        train, test = folds != k, folds == k
        fit = ridge_map(x[train], y[train], folds[train])
        assert fit.lam == nested.lam[k]
        np.testing.assert_allclose(fit(x[test]), nested.pred[test], rtol=1e-8, atol=1e-10)


def test_ridge_map_falls_back_on_a_single_fold() -> None:
    x, y, _ = _overfit_data(4)
    fit = ridge_map(x[:9], y[:9, 0], np.zeros(9, dtype=np.int64))
    assert not fit.cv and fit.lam == FALLBACK_LAM
    assert fit.weight.shape == (150, 1) and fit(x[9:12]).shape == (3, 1)


def test_permutation_null_and_p_value() -> None:
    rng = np.random.default_rng(0)
    episodes = np.repeat(np.arange(40), 5)
    belief = rng.random((40, 1)).repeat(5, axis=0) + 0.1 * rng.random((200, 1))
    x = np.concatenate([belief + 0.01 * rng.normal(size=(200, 1)),
                        rng.normal(size=(200, 5))], axis=1)
    folds = group_folds(episodes, 5, np.random.default_rng(1))
    nulls = null_targets(belief, episodes, np.random.default_rng(2), 20)
    fit = ridge_heldout(x, belief, folds, nulls=nulls)
    assert fit.null_r2.shape == (20,) and fit.r2 > 0.95
    assert fit.null_r2.max() < 0.2 and fit.p_value == pytest.approx(1 / 21)
    noise = rng.normal(size=(200, 1))
    flat = ridge_heldout(rng.normal(size=(200, 6)), noise, folds,
                         nulls=null_targets(noise, episodes, np.random.default_rng(3), 20))
    assert flat.p_value > 0.05


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_episode_sums_give_the_r2_of_any_resample(seed: int) -> None:
    rng = np.random.default_rng(seed)
    episodes = np.repeat(np.arange(7), 4)
    y = rng.random((28, 3))
    pred = y + 0.2 * rng.normal(size=y.shape)
    sums = episode_sums(y, pred, episodes, np.arange(7))
    assert float(sums.r2()) == pytest.approx(_r2(y, pred), rel=1e-9)
    pick = rng.integers(0, 7, 7)
    rows = np.concatenate([np.flatnonzero(episodes == e) for e in pick])
    weights = np.bincount(pick, minlength=7)
    assert float(sums.r2(weights)) == pytest.approx(_r2(y[rows], pred[rows]), rel=1e-9)
