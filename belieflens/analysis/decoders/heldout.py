"""Held-out predictions of the one estimator, streamed: each row comes from the fit that never
saw its episode.

:func:`heldout_ridge` is :func:`~belieflens.analysis.decoders.estimator.ridge_heldout`'s
nested-CV ridge fit (standardised features, λ chosen inside each outer fold's training folds)
with its rows read a block at a time; :func:`heldout_distribution` projects its predictions of
a distribution onto the probability simplex (the decoders' read-out of an oracle).
:func:`transfer_ridge` scores the same outer folds' fits on the rows of another condition
(each row by the fit that never saw its episode's fold).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from belieflens.analysis.decoders.estimator import fold_maps
from belieflens.analysis.decoders.ridge import DEFAULT_LAMBDAS, RidgeFitter

F64 = NDArray[np.float64]

BLOCK_ROWS = 512
"""Rows of a held-out fit read and converted to float64 at a time. A block's float64 rows are
its working memory (2.4 MB at the default model's width) beside the fit's per-fold
``d_model²`` statistics, so a fit's memory does not grow with its rows
(``bench/analysis_memory.py`` measures the analysis's peak)."""


def heldout_ridge(
    x: ArrayLike,
    y: ArrayLike,
    folds: ArrayLike,
    *,
    rows: ArrayLike | None = None,
    block: int = BLOCK_ROWS,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
) -> tuple[F64, F64]:
    """Held-out predictions ``[n, t]`` of ``y [n, t]`` from ``x [N, d]`` by nested CV over
    ``folds [n]`` (whole episodes per fold, at least 3 with rows), and the λ of each outer
    fold ``[n_folds]`` (NaN for a fold without rows).

    ``rows [n]`` picks the rows of ``x`` the targets belong to (default: all, ``n == N``);
    ``x`` may be stored in any float dtype: it is read ``block`` rows at a time, so no float64
    copy of it is made. Equal to :func:`~belieflens.analysis.decoders.estimator.ridge_heldout`
    on the same rows.
    """
    xs = np.asarray(x)
    ya = np.asarray(y, dtype=np.float64)
    ya = ya[:, None] if ya.ndim == 1 else ya
    fa = np.asarray(folds, dtype=np.int64).ravel()
    idx = np.arange(xs.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64).ravel()
    if idx.shape[0] != ya.shape[0] or fa.shape[0] != ya.shape[0]:
        raise ValueError(f"x rows {idx.shape[0]}, y rows {ya.shape[0]} and folds "
                         f"{fa.shape[0]} differ")
    step = max(1, block)
    spans = [(a, min(a + step, idx.shape[0])) for a in range(0, idx.shape[0], step)]
    fitter = RidgeFitter(int(fa.max()) + 1)
    for a, b in spans:
        fitter.update(np.asarray(xs[idx[a:b]], dtype=np.float64), ya[a:b], fa[a:b])
    maps = fold_maps(fitter, lambdas=lambdas)
    out = np.full(ya.shape, np.nan)
    for a, b in spans:
        xb, fb = np.asarray(xs[idx[a:b]], dtype=np.float64), fa[a:b]
        for k in np.unique(fb):
            fit = maps[int(k)]
            if fit is not None:
                m = fb == k
                out[a:b][m] = fit(xb[m])
    lam = np.array([m.lam if m is not None else np.nan for m in maps])
    return out, lam


def simplex(v: ArrayLike) -> F64:
    """Each row of ``v [n, k]`` projected onto the probability simplex: the distribution
    nearest to it in Euclidean distance (Duchi et al., 2008).

    Examples:
        >>> simplex([[0.7, 0.3], [1.2, -0.2], [0.5, 0.1]]).round(3).tolist()
        [[0.7, 0.3], [1.0, 0.0], [0.7, 0.3]]
    """
    a = np.asarray(v, dtype=np.float64)
    k = a.shape[1]
    u = -np.sort(-a, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    ok = u - css / np.arange(1, k + 1) > 0
    rho = k - 1 - np.argmax(ok[:, ::-1], axis=1)
    theta = css[np.arange(a.shape[0]), rho] / (rho + 1)
    return np.asarray(np.maximum(a - theta[:, None], 0.0), dtype=np.float64)


def heldout_distribution(
    x: ArrayLike,
    y: ArrayLike,
    folds: ArrayLike,
    *,
    rows: ArrayLike | None = None,
    block: int = BLOCK_ROWS,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
) -> F64:
    """Held-out distributions ``[n, k]``: :func:`heldout_ridge` of the distributions
    ``y [n, k]`` (rows renormalised), each prediction projected onto the simplex
    (:func:`simplex`). The ridge fit's predictions of distributions already sum to 1 (each
    coordinate's fit is linear in the targets, whose sum is 1 on every row); the projection
    clips what lies outside [0, 1]."""
    ya = np.asarray(y, dtype=np.float64)
    if ya.ndim != 2 or np.any(ya < 0) or not np.all(np.isfinite(ya)):
        raise ValueError("targets must be [n, k] finite non-negative distributions")
    s = ya.sum(axis=1, keepdims=True)
    pred, _ = heldout_ridge(x, ya / np.where(s > 0, s, 1.0), folds, rows=rows, block=block,
                            lambdas=lambdas)
    return simplex(pred)


def transfer_ridge(
    x: ArrayLike,
    y: ArrayLike,
    folds: ArrayLike,
    x_test: ArrayLike,
    test_folds: ArrayLike,
    *,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
) -> F64:
    """Predictions ``[m, t]`` at the rows ``x_test [m, d]`` of another condition by the
    nested-CV ridge fit of ``y [n, t]`` on ``x [n, d]`` over ``folds [n]`` (at least 3 with
    rows): row ``j`` is predicted by the map of outer fold ``test_folds[j]``, fitted on the
    other folds' rows with its λ chosen inside them, so an episode of the test condition is
    never predicted by a fit that saw the same episode in the training condition. With
    ``x_test = x`` and ``test_folds = folds`` it is :func:`heldout_ridge`'s predictions.

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(60, 3))
        >>> f = np.arange(60) // 12
        >>> y = x @ np.array([1.0, 0.0, -2.0])
        >>> same = transfer_ridge(x, y, f, x, f)
        >>> bool(np.allclose(same, heldout_ridge(x, y, f)[0]))
        True
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    ya = ya[:, None] if ya.ndim == 1 else ya
    fa = np.asarray(folds, dtype=np.int64).ravel()
    xt = np.asarray(x_test, dtype=np.float64)
    ft = np.asarray(test_folds, dtype=np.int64).ravel()
    if xt.shape[0] != ft.shape[0]:
        raise ValueError(f"x_test rows {xt.shape[0]} and test_folds {ft.shape[0]} differ")
    fitter = RidgeFitter(int(max(fa.max(), ft.max(initial=0))) + 1)
    fitter.update(xa, ya, fa)
    maps = fold_maps(fitter, lambdas=lambdas)
    out = np.full((xt.shape[0], ya.shape[1]), np.nan)
    for k in np.unique(ft):
        fit = maps[int(k)]
        if fit is None:
            raise ValueError(f"test fold {int(k)} has no training rows to be held out from")
        m = ft == k
        out[m] = fit(xt[m])
    return out
