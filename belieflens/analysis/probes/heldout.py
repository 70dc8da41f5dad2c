"""Held-out predictions of softmax probes: each row comes from the probe fitted without it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike, NDArray

from belieflens.analysis.probes.softmax import (
    HeadBatch,
    _as_distributions,
    _fit_heads,
    _Heads,
    _log_softmax,
)

F64 = NDArray[np.float64]


def heldout_softmax(
    x: ArrayLike,
    y: ArrayLike,
    folds: ArrayLike,
    *,
    lam: float = 1e-3,
    max_iter: int = 500,
    tol: float = 1e-6,
) -> F64:
    """Held-out probabilities ``[n, k]``: row ``i`` from the probe fitted on every other fold.

    ``x [n, d_model]``, ``y [n, k]`` (distributions, soft targets), ``folds [n]`` in
    ``0 .. n_folds-1`` (e.g. :func:`~belieflens.analysis.probes.group_folds` by episode, so
    no episode is in a probe's training and test rows). All folds are fitted in one joint
    L-BFGS optimisation, as in :func:`~belieflens.analysis.probes.cross_validate_softmax`.
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = _as_distributions(y)
    fa = np.asarray(folds, dtype=np.int64).ravel()
    n_folds = int(fa.max()) + 1

    def batches() -> Iterator[HeadBatch]:
        yield xa, ya[None], fa

    heads = _Heads(task=np.zeros(n_folds, dtype=np.int64), skip=np.arange(n_folds))
    fit = _fit_heads(batches, heads, n_folds, lam, max_iter, tol)
    out = np.full(ya.shape, np.nan)
    for k in range(n_folds):
        m = fa == k
        if m.any():
            out[m] = np.exp(_log_softmax(xa[m] @ fit.coef[k] + fit.intercept[k]))
    return out
