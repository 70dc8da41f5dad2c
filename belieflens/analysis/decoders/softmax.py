"""Multinomial logistic decoders with soft targets, fitted by L-BFGS over streamed batches."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from belieflens.analysis.decoders.provenance import DecoderProvenance, package_version
from belieflens.analysis.divergence import tvd_values

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

Batch = tuple[ArrayLike, ArrayLike]
"""One batch ``(X [n, d_model], Y [n, ...])``."""

BatchFactory = Callable[[], Iterable[Batch]]
"""Returns a fresh iterable over the whole data set at each call (one pass)."""


FIT_BLAS_THREADS: int | None = 1
"""BLAS threads of a decoder fit (``None``: the libraries' own default). One, because
L-BFGS-B's many small vector operations lose far more to BLAS thread hand-offs than the
objective's thin products gain; parallelism comes
from fitting layer groups at once."""


class _BlasLimit(AbstractContextManager["_BlasLimit"]):
    """Hold BLAS at :data:`FIT_BLAS_THREADS` while any fit in this process runs.

    BLAS thread counts are process-wide, so fits on concurrent threads (dask's) share one
    limit: the first to enter sets it and the last to leave restores the count it found.
    (One ``threadpool_limits`` per fit would let a fit that entered second restore the
    first one's limit, leaving BLAS at one thread after the analysis.)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._limiter: Any = None

    def __enter__(self) -> _BlasLimit:
        with self._lock:
            if self._users == 0:
                from threadpoolctl import threadpool_limits

                self._limiter = threadpool_limits(limits=FIT_BLAS_THREADS, user_api="blas")
            self._users += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None


FIT_BLAS_LIMIT = _BlasLimit()
"""The one shared limit (a context manager): every fit enters it, and code that runs fits on
other threads (dask's) enters it first from its own thread, because a limit set from a
worker thread is not always seen by the others (OpenBLAS keeps the count set from the main
thread once it has set one)."""


def _log_softmax(z: F64) -> F64:
    m = z.max(axis=-1, keepdims=True)
    s = z - m
    return np.asarray(s - np.log(np.exp(s).sum(axis=-1, keepdims=True)))


@dataclass(frozen=True, eq=False)
class SoftmaxDecoder:
    """A fitted softmax decoder: ``P(outcome) = softmax(X @ coef + intercept)``."""

    coef: F64
    """Weights ``[d_model, k]`` in raw residual units."""
    intercept: F64
    """Intercepts ``[k]``."""
    provenance: DecoderProvenance
    """What it was fitted on."""

    def log_proba(self, x: ArrayLike) -> F64:
        """Log-probabilities ``[n, k]`` for residuals ``x [n, d_model]``."""
        return _log_softmax(np.asarray(x, dtype=np.float64) @ self.coef + self.intercept)

    def predict_proba(self, x: ArrayLike) -> F64:
        """Probabilities ``[n, k]`` for residuals ``x [n, d_model]``."""
        return np.exp(self.log_proba(x))


HeadBatch = tuple[F64, F64, I64]
"""Internal batch: ``X [n, d]``, targets per task ``[T, n, k]``, fold per row ``[n]``."""


@dataclass(frozen=True, eq=False)
class _Heads:
    """Independent softmax problems sharing X: head h fits task ``task[h]`` on rows not in
    fold ``skip[h]`` (``-1``: all rows)."""

    task: I64
    skip: I64


@dataclass(frozen=True, eq=False)
class _HeadFit:
    coef: F64  # [H, d, k] raw units
    intercept: F64  # [H, k]
    n_train: I64  # [H]
    passes: int


class _Moments:
    """Per-fold feature means and centred sums of squares (diagonal only)."""

    def __init__(self, n_folds: int) -> None:
        self.n = np.zeros(n_folds)
        self.mean: list[F64 | None] = [None] * n_folds
        self.m2: list[F64 | None] = [None] * n_folds

    def update(self, x: F64, folds: I64) -> None:
        for fold in np.unique(folds):
            xb = x[folds == fold]
            nb, mb = xb.shape[0], xb.mean(0)
            m2b = ((xb - mb) ** 2).sum(0)
            k = int(fold)
            cur, na = self.mean[k], self.n[k]
            if cur is None:
                self.n[k], self.mean[k], self.m2[k] = nb, mb, m2b
                continue
            old_m2 = self.m2[k]
            assert old_m2 is not None
            n = na + nb
            d = mb - cur
            self.mean[k] = cur + d * nb / n
            self.m2[k] = old_m2 + m2b + d * d * na * nb / n
            self.n[k] = n

    def pooled(self, skip: int) -> tuple[float, F64, F64]:
        """``(n, mean, sd)`` over all folds except ``skip``."""
        n, mean, m2 = 0.0, None, None
        for k in range(len(self.n)):
            mk, m2k = self.mean[k], self.m2[k]
            if k == skip or mk is None or m2k is None:
                continue
            if mean is None or m2 is None:
                n, mean, m2 = self.n[k], mk, m2k
                continue
            tot = n + self.n[k]
            d = mk - mean
            mean = mean + d * self.n[k] / tot
            m2 = m2 + m2k + d * d * n * self.n[k] / tot
            n = tot
        if mean is None or m2 is None:
            raise ValueError("a softmax head has no training rows")
        sd = np.sqrt(m2 / max(n, 1.0))
        return n, mean, np.where(sd > 0, sd, 1.0)


def _fit_heads(batches: Callable[[], Iterable[HeadBatch]], heads: _Heads, n_folds: int, lam: float,
               max_iter: int, tol: float) -> _HeadFit:
    """Fit all heads jointly (their losses are independent) by L-BFGS, one pass per evaluation."""
    moments = _Moments(n_folds)
    d = k = 0
    for x, y, f in batches():
        moments.update(x, f)
        d, k = x.shape[1], y.shape[-1]
    if d == 0:
        raise ValueError("no data")
    h_count = heads.task.shape[0]
    pooled = [moments.pooled(int(s)) for s in heads.skip]
    n_h = np.array([p[0] for p in pooled])
    _, mu0, _ = moments.pooled(-1)
    mu = np.stack([p[1] for p in pooled]) - mu0  # [H, d] relative to the global shift
    sd = np.stack([p[2] for p in pooled])  # [H, d]
    passes = 0

    def effective(theta: F64) -> tuple[F64, F64, F64, F64]:
        p = theta.reshape(h_count, d + 1, k)
        w, b = p[:, :d], p[:, d]
        w_eff = w / sd[:, :, None]
        b_eff = b - np.matmul((mu / sd)[:, None, :], w)[:, 0, :]
        return w, b, w_eff, b_eff

    def objective(theta: F64) -> tuple[float, F64]:
        nonlocal passes
        passes += 1
        w, _, w_eff, b_eff = effective(theta)
        loss = 0.5 * lam * float(np.sum(w * w))
        g_weff = np.zeros_like(w_eff)
        g_beff = np.zeros_like(b_eff)
        # every head's weights side by side: one [n, d] @ [d, H*k] product per batch (and
        # one for the gradient) instead of H products with k columns each
        w_all = w_eff.transpose(1, 0, 2).reshape(d, h_count * k)
        for x, y, f in batches():
            xs = x - mu0
            z = (xs @ w_all).reshape(-1, h_count, k).transpose(1, 0, 2)
            logp = _log_softmax(z + b_eff[:, None, :])
            weight = (f[None, :] != heads.skip[:, None]) / n_h[:, None]  # [H, n]
            yt = y[heads.task]  # [H, n, k]
            loss -= float(np.sum(weight * np.sum(yt * logp, axis=-1)))
            g = (np.exp(logp) - yt) * weight[:, :, None]
            g_all = xs.T @ g.transpose(1, 0, 2).reshape(-1, h_count * k)
            g_weff += g_all.reshape(d, h_count, k).transpose(1, 0, 2)
            g_beff += g.sum(axis=1)
        g_w = g_weff / sd[:, :, None] - (mu / sd)[:, :, None] * g_beff[:, None, :] + lam * w
        grad = np.concatenate([g_w, g_beff[:, None, :]], axis=1)
        return loss, grad.ravel()

    theta0 = np.zeros(h_count * (d + 1) * k)
    from scipy.optimize import minimize  # imported on use: it is slow to import

    with FIT_BLAS_LIMIT:
        res = minimize(objective, theta0, jac=True, method="L-BFGS-B",
                       options={"maxiter": max_iter, "gtol": tol, "ftol": tol * 1e-3})
    _, _, w_eff, b_eff = effective(np.asarray(res.x, dtype=np.float64))
    intercept = b_eff - np.matmul(mu0, w_eff)
    return _HeadFit(coef=w_eff, intercept=intercept, n_train=n_h.astype(np.int64), passes=passes)


class SoftmaxFitter:
    """Multinomial logistic regression with soft targets (distributions), fitted by L-BFGS.

    The data come from a batch factory (called once per pass), so they need not fit
    in memory: one pass for feature statistics, then one per function evaluation.
    """

    def __init__(self, lam: float = 1e-3, *, max_iter: int = 500, tol: float = 1e-6,
                 target: str = "target", layer: int | None = None,
                 model_id: str | None = None) -> None:
        """Configure the penalty ``lam`` (standardised units) and the optimiser."""
        if lam < 0:
            raise ValueError(f"lam must be >= 0, got {lam}")
        self.lam, self.max_iter, self.tol = lam, max_iter, tol
        self.target, self.layer, self.model_id = target, layer, model_id

    def fit(self, batches: BatchFactory) -> SoftmaxDecoder:
        """Fit on every batch ``(X [n, d_model], Y [n, k])``; rows of Y are distributions."""

        def head_batches() -> Iterator[HeadBatch]:
            for x, y in batches():
                xa = np.asarray(x, dtype=np.float64)
                ya = _as_distributions(y)
                yield xa, ya[None], np.zeros(xa.shape[0], dtype=np.int64)

        heads = _Heads(task=np.zeros(1, dtype=np.int64), skip=np.full(1, -1, dtype=np.int64))
        fit = _fit_heads(head_batches, heads, 1, self.lam, self.max_iter, self.tol)
        prov = DecoderProvenance(
            kind="softmax",
            target=self.target,
            layer=self.layer,
            lam=float(self.lam),
            n_train=int(fit.n_train[0]),
            d_model=int(fit.coef.shape[1]),
            n_outputs=int(fit.coef.shape[2]),
            model_id=self.model_id,
            belieflenspackage_version=package_version(),
        )
        return SoftmaxDecoder(coef=fit.coef[0], intercept=fit.intercept[0], provenance=prov)


def _as_distributions(y: ArrayLike) -> F64:
    ya = np.asarray(y, dtype=np.float64)
    if ya.ndim != 2:
        raise ValueError(f"softmax targets must be [n, k] distributions, got shape {ya.shape}")
    if np.any(ya < 0) or not np.all(np.isfinite(ya)):
        raise ValueError("softmax targets must be finite and non-negative")
    s = ya.sum(axis=1, keepdims=True)
    return np.asarray(ya / np.where(s > 0, s, 1.0))


@dataclass(frozen=True, eq=False)
class SoftmaxCV:
    """Grouped cross-validation of softmax decoders, one score per task (e.g. real, control)."""

    kl: F64
    """Mean held-out KL(target ‖ decoder) in nats per task ``[T]``."""
    tvd: F64
    """Mean held-out total variation distance per task ``[T]``."""
    n: int
    """Number of held-out rows (each row is held out once)."""
    passes: int
    """Passes over the data the optimiser made."""


def cross_validate_softmax(
    batches: Callable[[], Iterable[tuple[ArrayLike, ArrayLike, ArrayLike]]],
    n_folds: int,
    lam: float = 1e-3,
    *,
    max_iter: int = 500,
    tol: float = 1e-6,
) -> SoftmaxCV:
    """Grouped CV of softmax decoders; all folds and tasks are fitted in one joint optimisation.

    ``batches()`` yields ``(X [n, d], Y, folds [n])`` with ``Y`` either ``[n, k]`` (one
    task) or ``[T, n, k]`` (several target sets on the same rows, e.g. real and control).
    """

    def head_batches() -> Iterator[HeadBatch]:
        for x, y, f in batches():
            ya = np.asarray(y, dtype=np.float64)
            ya = ya[None] if ya.ndim == 2 else ya
            ys = np.stack([_as_distributions(t) for t in ya])
            yield np.asarray(x, dtype=np.float64), ys, np.asarray(f, dtype=np.int64).ravel()

    first = next(iter(head_batches()), None)
    if first is None:
        raise ValueError("no data")
    n_tasks = first[1].shape[0]
    task = np.repeat(np.arange(n_tasks), n_folds).astype(np.int64)
    skip = np.tile(np.arange(n_folds), n_tasks).astype(np.int64)
    fit = _fit_heads(head_batches, _Heads(task, skip), n_folds, lam, max_iter, tol)
    kl_sum = np.zeros(n_tasks)
    tvd_sum = np.zeros(n_tasks)
    n = 0
    for x, ys, f in head_batches():
        n += x.shape[0]
        for h in range(task.shape[0]):
            m = f == skip[h]
            if not m.any():
                continue
            logq = _log_softmax(x[m] @ fit.coef[h] + fit.intercept[h])
            p = ys[task[h]][m]
            logp = np.log(np.where(p > 0, p, 1.0))
            kl_sum[task[h]] += float(np.sum(np.where(p > 0, p * (logp - logq), 0.0)))
            tvd_sum[task[h]] += float(tvd_values(p, np.exp(logq), axis=None))
    return SoftmaxCV(kl=kl_sum / max(n, 1), tvd=tvd_sum / max(n, 1), n=n, passes=fit.passes)
