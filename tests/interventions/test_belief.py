"""The interventions' belief reads: each fold read by a map fitted without it, its λ chosen
over the training rows' own episode folds (never the read fold's) and stored per layer and
fold."""

from __future__ import annotations

import numpy as np

from belieflens.analysis.decoders.estimator import FALLBACK_LAM
from belieflens.analysis.decoders.folds import group_folds
from belieflens.interventions.belief import cross_fit_reads, inner_folds


def _data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """40 episodes of 4 rows, two layers of 60 noisy features, a 3-state belief that two
    features of each layer carry."""
    rng = np.random.default_rng(seed)
    episodes = np.repeat(np.arange(40), 4)
    b = rng.dirichlet(np.ones(3), size=episodes.size)
    x = rng.normal(size=(episodes.size, 2, 60))
    x[:, :, :3] += 8.0 * b[:, None, :]
    return x, b, episodes


def test_reads_lambda_per_layer_and_fold_never_sees_the_read_fold() -> None:
    x, b, episodes = _data(0)
    folds = group_folds(episodes, 5, np.random.default_rng(0))
    base = cross_fit_reads(x, b, folds, episodes)
    assert base.lam.shape == (2, 5) and np.all(np.isin(base.lam, np.logspace(-6, 3, 19)))
    assert np.isfinite(base.read).all()
    for f in range(5):
        rows = folds == f
        garbled_x, garbled_b = x.copy(), b.copy()
        garbled_x[rows] = np.random.default_rng(f).normal(scale=50.0, size=x[rows].shape)
        garbled_b[rows] = np.random.default_rng(f + 9).dirichlet(np.ones(3), size=rows.sum())
        again = cross_fit_reads(garbled_x, garbled_b, folds, episodes)
        np.testing.assert_array_equal(again.lam[:, f], base.lam[:, f])
        for li in range(2):  # the read fold's map is unchanged: its weights are the same
            np.testing.assert_allclose(again.maps[li][f].weight, base.maps[li][f].weight)


def test_reads_use_only_training_rows_and_fit_the_belief() -> None:
    x, b, episodes = _data(1)
    folds = group_folds(episodes, 4, np.random.default_rng(1))
    train = np.ones(folds.size, dtype=bool)
    train[::7] = False  # rows without an oracle: read, never fitted on
    fits = cross_fit_reads(x, b, folds, episodes, train)
    sse = float(((fits.read[:, 0] - b) ** 2).sum())
    assert 1.0 - sse / float(((b - b.mean(0)) ** 2).sum()) > 0.5
    spoiled = b.copy()
    spoiled[~train] = 0.0
    np.testing.assert_allclose(cross_fit_reads(x, spoiled, folds, episodes, train).read,
                               fits.read)


def test_inner_folds_fall_back_to_episodes() -> None:
    outer = np.array([0, 0, 2, 2, 3])
    np.testing.assert_array_equal(inner_folds(outer, np.arange(5)), outer)
    one = np.zeros(12, dtype=np.int64)
    episodes = np.repeat(np.arange(6), 2)
    by_episode = inner_folds(one, episodes)
    assert np.unique(by_episode).size == 5  # FOLDS folds of the rows' own episodes
    for e in range(6):
        assert np.unique(by_episode[episodes == e]).size == 1
    assert np.unique(inner_folds(one, np.zeros(12))).size == 1
    x, b, eps = _data(2)
    two = group_folds(eps, 2, np.random.default_rng(0))
    fits = cross_fit_reads(x, b, two, eps)  # one training fold each: λ over its episodes
    assert all(m.cv for by in fits.maps for m in by)
    lone = cross_fit_reads(x[:8], b[:8], np.repeat([0, 1], 4), eps[:8])  # 1 episode each
    assert not any(m.cv for by in lone.maps for m in by) and np.all(lone.lam == FALLBACK_LAM)
