"""Tests for linear decoders on residuals (``belieflens.analysis.decoders``), on synthetic data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from belieflens.analysis.decoders import (
    RidgeDecoder,
    RidgeFitter,
    RidgeStats,
    SoftmaxDecoder,
    SoftmaxFitter,
    cross_validate_softmax,
    decoder_layers,
    decoder_layers_array,
    fold_split,
    group_folds,
    load_decoder,
    save_decoder,
    shuffle_by_group,
)
from belieflens.analysis.decoders.estimator import ridge_heldout
from belieflens.analysis.decoders.heldout import heldout_distribution, heldout_ridge, simplex
from belieflens.analysis.decoders.softmax import FIT_BLAS_LIMIT
from belieflens.dims import D_MODEL, EPISODE, LAYER, OUTCOME, QUERY, TURN

D = 12
N_EP = 40
N_TURN = 5


def _episodes() -> np.ndarray:
    return np.repeat(np.arange(N_EP), N_TURN)


def _planted(seed: int = 0, noise: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residuals [query, layer=3, d]: layer 0 is pure noise, layers 1 and 2 carry y linearly.

    The target varies within episodes (per turn), so a decoder must read it from the
    residual, not from the episode identity.
    """
    rng = np.random.default_rng(seed)
    n = N_EP * N_TURN
    y = rng.normal(size=n)
    w = rng.normal(size=D)
    w /= np.linalg.norm(w)
    base = rng.normal(size=(n, D)) * 3 + 100.0  # large offset: centring must be stable
    resid = np.stack(
        [
            rng.normal(size=(n, D)),
            base + np.outer(y, w) * 5 - np.outer(base @ w - 100.0 * w.sum(), w),
            0.1 * rng.normal(size=(n, D)) + np.outer(y, w) * 2,
        ],
        axis=1,
    )
    y_obs = y + noise * rng.normal(size=n)
    return resid, y_obs, _episodes()


# ----------------------------------------------------------------------------- folds


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 30), min_size=10, max_size=200),
    st.integers(2, 6),
    st.integers(0, 2**32 - 1),
)
def test_group_folds_never_split_a_group(groups: list[int], k: int, seed: int) -> None:
    g = np.array(groups)
    if np.unique(g).size < k:
        with pytest.raises(ValueError):
            group_folds(g, k, np.random.default_rng(seed))
        return
    folds = group_folds(g, k, np.random.default_rng(seed))
    assert folds.shape == g.shape and folds.min() >= 0 and folds.max() < k
    for fold in range(k):
        train, test = fold_split(folds, fold)
        assert not (train & test).any() and (train | test).all()
        assert not set(g[train]) & set(g[test])
    # every group in exactly one fold; folds balanced in number of groups
    per_group = {int(x): set(folds[g == x].tolist()) for x in np.unique(g)}
    assert all(len(v) == 1 for v in per_group.values())
    counts = np.bincount([next(iter(v)) for v in per_group.values()], minlength=k)
    assert counts.max() - counts.min() <= 1


def test_group_folds_seeded() -> None:
    g = _episodes()
    a = group_folds(g, 5, np.random.default_rng(1))
    b = group_folds(g, 5, np.random.default_rng(1))
    c = group_folds(g, 5, np.random.default_rng(2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_shuffle_by_group_keeps_episodes_together() -> None:
    g = _episodes()
    y = np.arange(g.size, dtype=float)  # unique values reveal the source row
    out = shuffle_by_group(y, g, np.random.default_rng(0))
    np.testing.assert_array_equal(np.sort(out), y)  # equal groups: an exact permutation
    src_episode = g[out.astype(int)]
    for e in range(N_EP):
        assert np.unique(src_episode[g == e]).size == 1  # one source episode per episode
    assert np.mean(src_episode != g) > 0.8
    np.testing.assert_array_equal(out, shuffle_by_group(y, g, np.random.default_rng(0)))
    # unequal group sizes: rows cycle within the source group
    g2 = np.array([0, 0, 0, 1, 2, 2])
    out2 = shuffle_by_group(np.arange(6.0), g2, np.random.default_rng(3))
    assert out2.shape == (6,)


# ----------------------------------------------------------------------------- ridge


def test_ridge_stats_merge_matches_batch() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 4)) + 1e4
    y = rng.normal(size=(50, 2))
    whole = RidgeStats.from_batch(x, y)
    cuts = [(0, 7), (7, 30), (30, 50)]
    parts = RidgeStats.combine(RidgeStats.from_batch(x[a:b], y[a:b]) for a, b in cuts)
    assert parts is not None and parts.n == 50
    np.testing.assert_allclose(parts.sxx, whole.sxx, rtol=1e-8)
    np.testing.assert_allclose(parts.sxy, whole.sxy, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(parts.syy, whole.syy, rtol=1e-10)
    np.testing.assert_allclose(parts.mean_x, whole.mean_x, rtol=1e-12)


def test_ridge_small_lambda_matches_least_squares() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 5))
    y = x @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 4.0 + 0.1 * rng.normal(size=200)
    fitter = RidgeFitter()
    for a in range(0, 200, 64):
        fitter.update(x[a : a + 64], y[a : a + 64])
    decoder = fitter.fit(lam=1e-12)
    ref, *_ = np.linalg.lstsq(np.c_[x, np.ones(200)], y, rcond=None)
    np.testing.assert_allclose(decoder.coef[:, 0], ref[:5], atol=1e-6)
    assert decoder.intercept[0] == pytest.approx(ref[5], abs=1e-6)
    assert decoder.predict(x).shape == (200,)
    with pytest.raises(ValueError):
        RidgeFitter().fit()  # no data
    with pytest.raises(ValueError):
        fitter.fit()  # one fold: lam must be given


def test_ridge_cv_planted_signal_and_control() -> None:
    resid, y, ep = _planted()
    folds = group_folds(ep, 5, np.random.default_rng(0))
    ctrl = shuffle_by_group(y, ep, np.random.default_rng(1))
    for layer, expect_high in ((0, False), (1, True), (2, True)):
        fitter = RidgeFitter(5)
        for a in range(0, y.size, 37):  # streamed in uneven batches
            fitter.update(resid[a : a + 37, layer], np.c_[y, ctrl][a : a + 37], folds[a : a + 37])
        cv = fitter.cross_validate()
        assert cv.nested and cv.lam.shape == (5, 2)
        if expect_high:
            assert cv.r2[0] > 0.98
        else:
            assert cv.r2[0] < 0.1
        assert cv.r2[1] < 0.1  # control task: nothing to find
        fixed = fitter.cross_validate(lam=1e-3)
        assert not fixed.nested and np.all(fixed.lam == 1e-3)


def test_ridge_cv_sse_matches_explicit_predictions() -> None:
    """Held-out SSE from sufficient statistics equals SSE of explicit predictions."""
    resid, y, ep = _planted(3)
    x = resid[:, 2]
    folds = group_folds(ep, 4, np.random.default_rng(0))
    fitter = RidgeFitter(4)
    fitter.update(x, y, folds)
    cv = fitter.cross_validate(lam=0.1)
    for k in range(4):
        train, test = fold_split(folds, k)
        f = RidgeFitter()
        f.update(x[train], y[train])
        pred = f.fit(lam=0.1).predict(x[test])
        assert cv.sse[k, 0] == pytest.approx(np.sum((y[test] - pred) ** 2), rel=1e-8)
        assert cv.sst[k, 0] == pytest.approx(np.sum((y[test] - y[train].mean()) ** 2), rel=1e-8)


# ----------------------------------------------------------------------------- softmax


def _planted_distributions(seed: int = 0, k: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = N_EP * N_TURN
    x = rng.normal(size=(n, D)) * 2 + 50.0
    w = rng.normal(size=(D, k)) * 0.6
    logits = (x - 50.0) @ w
    p = np.exp(logits - logits.max(1, keepdims=True))
    return x, p / p.sum(1, keepdims=True), _episodes()


def test_softmax_fitter_recovers_planted_distributions() -> None:
    x, p, _ = _planted_distributions()

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for a in range(0, x.shape[0], 64):
            yield x[a : a + 64], p[a : a + 64]

    decoder = SoftmaxFitter(lam=1e-6, max_iter=1000, layer=3, target="oracle").fit(batches)
    q = decoder.predict_proba(x)
    np.testing.assert_allclose(q.sum(1), 1.0)
    kl = np.sum(p * (np.log(p) - np.log(q)), axis=1).mean()
    assert kl < 1e-3
    assert decoder.provenance.kind == "softmax" and decoder.provenance.layer == 3
    assert decoder.provenance.n_train == x.shape[0]


def test_softmax_cv_heldout_kl_low_and_control_high() -> None:
    x, p, ep = _planted_distributions(1)
    folds = group_folds(ep, 4, np.random.default_rng(0))
    ctrl = shuffle_by_group(p, ep, np.random.default_rng(1))

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for a in range(0, x.shape[0], 50):
            yield x[a : a + 50], np.stack([p, ctrl])[:, a : a + 50], folds[a : a + 50]

    cv = cross_validate_softmax(batches, 4, lam=1e-4)
    assert cv.n == x.shape[0]
    assert cv.kl[0] < 0.02 and cv.tvd[0] < 0.05
    assert cv.kl[1] > 10 * cv.kl[0]


def test_heldout_ridge_streamed_blocks_and_row_subset_equal_the_one_estimator() -> None:
    x, p, ep = _planted_distributions(2)
    folds = group_folds(ep, 4, np.random.default_rng(0))
    ref = ridge_heldout(x, p, folds)
    one, lam = heldout_ridge(x, p, folds, block=x.shape[0])
    np.testing.assert_allclose(one, ref.pred, atol=1e-8)
    np.testing.assert_array_equal(lam, ref.lam)  # the same λ per outer fold
    # float32 storage, streamed 37 rows at a time, the rows picked out of a larger array
    pad = np.concatenate([np.zeros((5, x.shape[1])), x]).astype(np.float32)
    rows = np.arange(5, 5 + x.shape[0])
    streamed, _ = heldout_ridge(pad, p, folds, rows=rows, block=37)
    ref32, _ = heldout_ridge(x.astype(np.float32), p, folds, block=x.shape[0])
    np.testing.assert_allclose(streamed, ref32, atol=1e-8)
    with pytest.raises(ValueError, match="differ"):
        heldout_ridge(x, p[:-1], folds[:-1], rows=rows)


def test_heldout_distribution_is_a_distribution_near_the_target() -> None:
    x, p, ep = _planted_distributions(2, k=3)
    folds = group_folds(ep, 4, np.random.default_rng(0))
    q = heldout_distribution(x, p, folds)
    np.testing.assert_allclose(q.sum(axis=1), 1.0)
    assert bool((q >= 0).all())
    tvd = 0.5 * np.abs(q - p).sum(axis=1).mean()
    shuffled = heldout_distribution(x, shuffle_by_group(p, ep, np.random.default_rng(1)), folds)
    assert tvd < 0.5 * (0.5 * np.abs(shuffled - p).sum(axis=1).mean())  # read, not guessed
    with pytest.raises(ValueError, match="distributions"):
        heldout_distribution(x, -p, folds)


@given(st.lists(st.lists(st.floats(-3, 3), min_size=3, max_size=3), min_size=1, max_size=8))
@settings(max_examples=60, deadline=None)
def test_simplex_is_the_nearest_distribution(rows: list[list[float]]) -> None:
    v = np.array(rows)
    q = simplex(v)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-9)
    assert bool((q >= 0).all())
    # no distribution on a grid of the simplex is nearer than the projection
    g = np.array([(a, b, 1 - a - b) for a in np.linspace(0, 1, 21) for b in np.linspace(0, 1, 21)
                  if a + b <= 1 + 1e-12])
    g = np.clip(g, 0, 1)
    for i in range(v.shape[0]):
        assert np.sum((q[i] - v[i]) ** 2) <= np.min(np.sum((g - v[i]) ** 2, axis=1)) + 1e-9


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]


def test_concurrent_fits_leave_blas_threads_as_they_found_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    import scipy.optimize

    x, p, ep = _planted_distributions(3)
    folds = group_folds(ep, 4, np.random.default_rng(0))
    inside: list[list[int]] = []
    real = scipy.optimize.minimize

    def minimize(*args: object, **kwargs: object) -> object:
        inside.append(_blas_threads())
        time.sleep(0.3)  # every fit is inside at once: they overlap, in any order
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "minimize", minimize)
    before = _blas_threads()
    with FIT_BLAS_LIMIT:  # as code running fits on dask's threads holds it
        def fit(n: int) -> None:
            def batches() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
                yield x, p, folds

            cross_validate_softmax(batches, 4, max_iter=n)

        threads = [threading.Thread(target=fit, args=(n,)) for n in (5, 300, 20, 100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    after = _blas_threads()
    assert before
    assert len(inside) == 4 and all(n == 1 for s in inside for n in s)  # one thread in a fit
    assert after == before  # the last fit out restored what the first one found


# ----------------------------------------------------------------------------- save / load


def test_save_load_roundtrip(tmp_path: Path) -> None:
    resid, y, _ = _planted()
    f = RidgeFitter(target="posterior_mean", layer=2, model_id="smollm2-135m")
    f.update(resid[:, 2], y)
    ridge = f.fit(lam=0.01)
    path = save_decoder(ridge, tmp_path / "ridge_l2")
    assert path.suffix == ".npz"
    back = load_decoder(path)
    assert isinstance(back, RidgeDecoder)
    assert back.provenance == ridge.provenance
    assert back.provenance.model_id == "smollm2-135m" and back.provenance.lam == 0.01
    np.testing.assert_array_equal(back.predict(resid[:, 2]), ridge.predict(resid[:, 2]))

    x, p, _ = _planted_distributions()
    soft = SoftmaxFitter(lam=1e-3, max_iter=50).fit(lambda: [(x, p)])
    back2 = load_decoder(save_decoder(soft, tmp_path / "soft.npz"))
    assert isinstance(back2, SoftmaxDecoder) and back2.provenance == soft.provenance
    np.testing.assert_array_equal(back2.predict_proba(x), soft.predict_proba(x))


# ----------------------------------------------------------------------------- per layer


def _dataset(resid: np.ndarray, ep: np.ndarray) -> xr.Dataset:
    n = resid.shape[0]
    return xr.Dataset(
        {"resid": ((QUERY, LAYER, D_MODEL), resid.astype(np.float32))},
        coords={
            EPISODE: (QUERY, ep),
            TURN: (QUERY, np.tile(np.arange(N_TURN), N_EP)),
            LAYER: np.arange(resid.shape[1]),
            QUERY: np.arange(n),
        },
    )


def test_decoder_layers_ridge_selectivity() -> None:
    resid, y, ep = _planted()
    ds = _dataset(resid, ep)
    y[:5] = np.nan  # queries without an oracle are dropped
    target = xr.DataArray(y, dims=[QUERY], name="posterior_mean")
    out = decoder_layers(ds, target, np.random.default_rng(0), chunk_size=33)
    assert out["score"].dims == (LAYER,)
    assert out.attrs["metric"] == "r2" and out.attrs["n_rows"] == y.size - 5
    score, ctrl = out["score"].values, out["control_score"].values
    assert score[0] < 0.1 and score[1] > 0.98 and score[2] > 0.95
    assert np.all(np.abs(ctrl) < 0.1)
    np.testing.assert_allclose(out["selectivity"], score - ctrl)
    # chunking does not change the result; the same rng gives the same folds
    again = decoder_layers(ds, target, np.random.default_rng(0), chunk_size=1000, layers=[1, 2])
    np.testing.assert_allclose(again["score"].values, score[1:], rtol=1e-6)
    np.testing.assert_array_equal(again[LAYER].values, [1, 2])


def test_decoder_layers_softmax() -> None:
    x, p, ep = _planted_distributions(2, k=3)
    resid = np.stack([np.random.default_rng(9).normal(size=x.shape), x], axis=1)
    ds = _dataset(resid, ep)
    target = xr.DataArray(p, dims=[QUERY, OUTCOME], name="oracle")
    out = decoder_layers(ds, target, np.random.default_rng(0), n_folds=4, softmax_lam=1e-4)
    assert out.attrs["metric"] == "kl" and out.attrs["higher_is_better"] == 0
    kl = out["score"].values
    assert kl[1] < 0.03 and kl[0] > 5 * kl[1]
    assert out["selectivity"].values[1] > 0.1
    assert set(out.data_vars) >= {"tvd", "control_tvd"}
    # streaming path (budget too small to hold a layer) gives the same numbers
    streamed = decoder_layers(
        ds, target, np.random.default_rng(0), n_folds=4, softmax_lam=1e-4,
        memory_budget=1, chunk_size=64,
    )  # fmt: skip
    np.testing.assert_allclose(streamed["score"].values, kl, rtol=1e-3, atol=1e-5)


def test_decoder_layers_array_and_errors() -> None:
    resid, y, ep = _planted()
    out = decoder_layers_array(resid[:, 1], y, ep, np.random.default_rng(0), n_folds=4, lam=1e-3)
    assert out.sizes[LAYER] == 1 and float(out["score"][0]) > 0.98
    assert float(out["lam"][0]) == 1e-3
    ds = _dataset(resid, ep).drop_vars(EPISODE)
    with pytest.raises(ValueError, match="episode"):
        decoder_layers(ds, xr.DataArray(y, dims=[QUERY]), np.random.default_rng(0))
    with pytest.raises(ValueError):
        short = xr.DataArray(y[:10], dims=[QUERY])
        decoder_layers(_dataset(resid, ep), short, np.random.default_rng(0))


def test_decoder_layers_lazy_file(tmp_path: Path) -> None:
    """A file opened lazily (nothing loaded up front) gives the in-memory numbers."""
    resid, y, ep = _planted()
    ds = _dataset(resid, ep)
    path = tmp_path / "cache.h5"
    ds.to_netcdf(path, engine="h5netcdf", encoding={"resid": {"chunksizes": (16, 3, D)}})
    target = xr.DataArray(y, dims=[QUERY])
    eager = decoder_layers(ds, target, np.random.default_rng(0), lam=1e-3)
    with xr.open_dataset(path, engine="h5netcdf") as lazy:
        assert not lazy["resid"].variable._in_memory
        out = decoder_layers(lazy, target, np.random.default_rng(0), lam=1e-3, chunk_size=16)
    np.testing.assert_allclose(out["score"].values, eager["score"].values, rtol=1e-9)
