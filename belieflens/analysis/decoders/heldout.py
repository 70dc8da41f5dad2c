"""Held-out predictions of softmax decoders: each row comes from the decoder fitted without it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike, NDArray

from belieflens.analysis.decoders.softmax import (
    HeadBatch,
    _as_distributions,
    _fit_heads,
    _Heads,
    _log_softmax,
)

F64 = NDArray[np.float64]

BLOCK_ROWS = 512
"""Rows of a held-out fit streamed through its loss and gradient at a time. A block's
float64 rows and their centred copy are its working memory (2.4 MB each at the default
model's width), the same for every fit once its rows exceed a block, so a fit's memory
does not grow with its rows (``bench/analysis_memory.py`` measures the analysis's peak)."""


def heldout_softmax(
    x: ArrayLike,
    y: ArrayLike,
    folds: ArrayLike,
    *,
    lam: float = 1e-3,
    max_iter: int = 500,
    tol: float = 1e-6,
    rows: ArrayLike | None = None,
    block: int = BLOCK_ROWS,
) -> F64:
    """Held-out probabilities ``[n, k]``: row ``i`` from the decoder fitted on every other fold.

    ``x [N, d_model]`` (any float dtype), ``y [n, k]`` (distributions, soft targets),
    ``folds [n]`` in ``0 .. n_folds-1`` (e.g. :func:`~belieflens.analysis.decoders.group_folds`
    by episode, so no episode is in a decoder's training and test rows); ``rows [n]`` picks the
    rows of ``x`` the targets belong to (default: all, ``n == N``). All folds are fitted in
    one joint L-BFGS optimisation, as in
    :func:`~belieflens.analysis.decoders.cross_validate_softmax`. The rows are streamed
    ``block`` at a time, each block taken from ``x`` and converted to float64 when it is
    used, so the working memory is a block's, not a float64 copy of ``x``.
    """
    xs = np.asarray(x)
    ya = _as_distributions(y)
    fa = np.asarray(folds, dtype=np.int64).ravel()
    idx = np.arange(xs.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64).ravel()
    if idx.shape[0] != ya.shape[0] or fa.shape[0] != ya.shape[0]:
        raise ValueError(f"x rows {idx.shape[0]}, y rows {ya.shape[0]} and folds "
                         f"{fa.shape[0]} differ")
    n_folds = int(fa.max()) + 1
    step = max(1, block)
    spans = [(a, min(a + step, idx.shape[0])) for a in range(0, idx.shape[0], step)]

    def rows_of(a: int, b: int) -> F64:
        return np.asarray(xs[idx[a:b]], dtype=np.float64)

    def batches() -> Iterator[HeadBatch]:
        for a, b in spans:
            yield rows_of(a, b), ya[None, a:b], fa[a:b]

    heads = _Heads(task=np.zeros(n_folds, dtype=np.int64), skip=np.arange(n_folds))
    fit = _fit_heads(batches, heads, n_folds, lam, max_iter, tol)
    out = np.full(ya.shape, np.nan)
    for a, b in spans:
        xb, fb = rows_of(a, b), fa[a:b]
        for k in np.unique(fb):
            m = fb == k
            out[a:b][m] = np.exp(_log_softmax(xb[m] @ fit.coef[k] + fit.intercept[k]))
    return out
