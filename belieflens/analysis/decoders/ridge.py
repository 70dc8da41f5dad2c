"""Streaming ridge regression decoders: centred sufficient statistics, grouped (nested) CV."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from belieflens.analysis.decoders.provenance import DecoderProvenance, package_version

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

DEFAULT_LAMBDAS: tuple[float, ...] = tuple(float(x) for x in np.logspace(-6, 3, 19))
"""Ridge penalties searched by cross-validation (standardised features, mean loss)."""


@dataclass(frozen=True, eq=False)
class RidgeStats:
    """Sufficient statistics of a least-squares problem, with centred moments."""

    n: int
    """Number of rows."""
    mean_x: F64
    """Feature means ``[d]``."""
    mean_y: F64
    """Target means ``[t]``."""
    sxx: F64
    """Centred scatter Σ (x−x̄)(x−x̄)ᵀ ``[d, d]``."""
    sxy: F64
    """Centred cross scatter Σ (x−x̄)(y−ȳ)ᵀ ``[d, t]``."""
    syy: F64
    """Centred target sums of squares Σ (y−ȳ)² ``[t]``."""

    @classmethod
    def from_batch(cls, x: ArrayLike, y: ArrayLike) -> RidgeStats:
        """Statistics of one batch ``x [n, d]``, ``y [n, t]``."""
        xa = np.asarray(x, dtype=np.float64)
        ya = np.asarray(y, dtype=np.float64)
        mx, my = xa.mean(0), ya.mean(0)
        xc, yc = xa - mx, ya - my
        return cls(xa.shape[0], mx, my, xc.T @ xc, xc.T @ yc, np.einsum("nt,nt->t", yc, yc))

    def merge(self, other: RidgeStats) -> RidgeStats:
        """Statistics of the union of both row sets (Chan et al.'s pairwise update)."""
        if self.n == 0:
            return other
        if other.n == 0:
            return self
        n = self.n + other.n
        dx = other.mean_x - self.mean_x
        dy = other.mean_y - self.mean_y
        f = self.n * other.n / n
        return RidgeStats(
            n=n,
            mean_x=self.mean_x + dx * (other.n / n),
            mean_y=self.mean_y + dy * (other.n / n),
            sxx=self.sxx + other.sxx + f * np.outer(dx, dx),
            sxy=self.sxy + other.sxy + f * np.outer(dx, dy),
            syy=self.syy + other.syy + f * dy * dy,
        )

    @staticmethod
    def combine(parts: Iterable[RidgeStats | None]) -> RidgeStats | None:
        """Merge several statistics (``None`` entries are skipped)."""
        out: RidgeStats | None = None
        for p in parts:
            if p is not None:
                out = p if out is None else out.merge(p)
        return out


def _ridge_path(train: RidgeStats, lambdas: F64) -> tuple[F64, F64]:
    """Coefficients ``[n_lambda, d, t]`` and intercepts ``[n_lambda, t]`` in raw feature units."""
    n = max(train.n, 1)
    s = np.sqrt(np.clip(np.diag(train.sxx), 0.0, None) / n)
    s = np.where(np.isfinite(s) & (s > 0), s, 1.0)
    c_xx = train.sxx / (n * np.outer(s, s))
    c_xy = train.sxy / (n * s[:, None])
    evals, evecs = np.linalg.eigh(c_xx)
    evals = np.clip(evals, 0.0, None)
    proj = evecs.T @ c_xy  # [d, t]
    shrunk = proj[None] / (evals[None, :, None] + lambdas[:, None, None])  # [n_lambda, d, t]
    w_std = np.matmul(evecs, shrunk)  # [n_lambda, d, t]
    coef = w_std / s[None, :, None]
    intercept = train.mean_y[None, :] - np.matmul(train.mean_x, coef)
    return coef, intercept


def _sse(test: RidgeStats, coef: F64, intercept: F64) -> F64:
    """Sum of squared errors ``[..., t]`` on the rows behind ``test`` for ``coef [..., d, t]``."""
    quad = np.sum(coef * np.matmul(test.sxx, coef), axis=-2)
    cross = np.sum(coef * test.sxy, axis=-2)
    bias = test.mean_y - np.matmul(test.mean_x, coef) - intercept
    return np.asarray(test.syy - 2.0 * cross + quad + test.n * bias * bias)


def _sst(test: RidgeStats, train: RidgeStats) -> F64:
    """Squared error ``[t]`` of predicting the training mean on the test rows."""
    d = test.mean_y - train.mean_y
    return np.asarray(test.syy + test.n * d * d)


@dataclass(frozen=True, eq=False)
class RidgeCV:
    """Grouped cross-validation of ridge: held-out R² per output."""

    r2: F64
    """Held-out R² per output ``[t]``: 1 − Σ SSE / Σ SST, pooled over folds, where SST is
    the error of predicting the training fold's mean (so 0 = no better than the mean)."""
    lam: F64
    """Penalty used in each outer fold, per output ``[n_folds, t]``."""
    sse: F64
    """Held-out sum of squared errors per fold and output ``[n_folds, t]``."""
    sst: F64
    """Held-out squared error of the training mean per fold and output ``[n_folds, t]``."""
    nested: bool
    """Whether ``lam`` was chosen by an inner CV that never saw the outer test fold."""


@dataclass(frozen=True, eq=False)
class RidgeDecoder:
    """A fitted ridge decoder: ``y ≈ X @ coef + intercept`` in raw residual units."""

    coef: F64
    """Weights ``[d_model, t]``."""
    intercept: F64
    """Intercepts ``[t]``."""
    scalar: bool
    """Whether it was fitted to a 1-d target (then :meth:`predict` returns ``[n]``)."""
    provenance: DecoderProvenance
    """What it was fitted on."""

    def predict(self, x: ArrayLike) -> F64:
        """Predictions ``[n]`` (scalar target) or ``[n, t]`` for residuals ``x [n, d_model]``."""
        out = np.asarray(x, dtype=np.float64) @ self.coef + self.intercept
        return np.asarray(out[:, 0] if self.scalar else out)


class RidgeFitter:
    """Streaming ridge regression: ``update`` on batches, then ``fit`` or ``cross_validate``.

    Keeps one :class:`RidgeStats` per fold (``d_model² `` floats each); pass
    ``folds`` (from :func:`~.folds.group_folds`) to ``update`` to enable grouped CV and
    choosing ``lam`` by it.
    """

    def __init__(self, n_folds: int = 1, *, target: str = "target", layer: int | None = None,
                 model_id: str | None = None) -> None:
        """Prepare an empty accumulator with ``n_folds`` folds (1 = no CV)."""
        if n_folds < 1:
            raise ValueError(f"n_folds must be >= 1, got {n_folds}")
        self.n_folds = n_folds
        self.target, self.layer, self.model_id = target, layer, model_id
        self._folds: list[RidgeStats | None] = [None] * n_folds
        self._scalar: bool | None = None

    def update(self, x: ArrayLike, y: ArrayLike, folds: ArrayLike | None = None) -> None:
        """Add a batch: ``x [n, d_model]``, ``y [n]`` or ``[n, t]``, ``folds [n]`` (ints)."""
        xa = np.asarray(x, dtype=np.float64)
        ya = np.asarray(y, dtype=np.float64)
        scalar = ya.ndim == 1
        if self._scalar is not None and scalar != self._scalar:
            raise ValueError("target shape changed between batches")
        self._scalar = scalar
        ya = ya[:, None] if scalar else ya
        if xa.ndim != 2 or ya.shape[0] != xa.shape[0]:
            raise ValueError(f"need x [n, d] and y [n, ...]; got {xa.shape} and {ya.shape}")
        if xa.shape[0] == 0:
            return
        if folds is None:
            if self.n_folds != 1:
                raise ValueError("this fitter has folds: pass folds= to update")
            self._add(0, xa, ya)
            return
        f = np.asarray(folds).ravel()
        if f.shape[0] != xa.shape[0] or f.min() < 0 or f.max() >= self.n_folds:
            raise ValueError(f"folds must be {xa.shape[0]} ints in [0, {self.n_folds})")
        for k in np.unique(f):
            m = f == k
            self._add(int(k), xa[m], ya[m])

    def _add(self, k: int, x: F64, y: F64) -> None:
        batch = RidgeStats.from_batch(x, y)
        cur = self._folds[k]
        self._folds[k] = batch if cur is None else cur.merge(batch)

    @property
    def stats(self) -> RidgeStats:
        """Statistics over all rows seen so far."""
        total = RidgeStats.combine(self._folds)
        if total is None:
            raise ValueError("no data: call update() first")
        return total

    @property
    def fold_stats(self) -> tuple[RidgeStats | None, ...]:
        """Statistics of each fold (``None`` where a fold got no rows)."""
        return tuple(self._folds)

    def _without(self, *skip: int) -> RidgeStats | None:
        return RidgeStats.combine(s for i, s in enumerate(self._folds) if i not in skip)

    def _cv_sse(self, lambdas: F64, among: Sequence[int]) -> F64:
        """Summed held-out SSE ``[n_lambda, t]`` of leave-one-fold-out over ``among``."""
        total: F64 | None = None
        for j in among:
            test = self._folds[j]
            train = RidgeStats.combine(self._folds[i] for i in among if i != j)
            if test is None or train is None:
                continue
            coef, icpt = _ridge_path(train, lambdas)
            sse = _sse(test, coef, icpt)
            total = sse if total is None else total + sse
        if total is None:
            raise ValueError("cross-validation needs at least two non-empty folds")
        return total

    def choose_lambda(self, lambdas: Sequence[float] = DEFAULT_LAMBDAS) -> F64:
        """Penalty per output ``[t]`` minimising the leave-one-fold-out SSE over all folds."""
        lam = np.asarray(lambdas, dtype=np.float64)
        sse = self._cv_sse(lam, range(self.n_folds))
        return np.asarray(lam[np.argmin(sse, axis=0)])

    def cross_validate(
        self,
        lam: float | None = None,
        lambdas: Sequence[float] = DEFAULT_LAMBDAS,
        *,
        nested: bool = True,
    ) -> RidgeCV:
        """Held-out R² per output by grouped leave-one-fold-out CV.

        With ``lam=None`` the penalty is chosen from ``lambdas`` per output; by an
        inner CV on the training folds only when ``nested`` (needs ≥ 3 folds), else on
        all folds (slightly optimistic).
        """
        if self.n_folds < 2:
            raise ValueError("cross-validation needs a fitter with n_folds >= 2")
        grid = np.asarray(lambdas, dtype=np.float64)
        if lam is None and not nested:
            chosen_all = self.choose_lambda(lambdas)
        t = self.stats.mean_y.shape[0]
        sse = np.full((self.n_folds, t), np.nan)
        sst = np.full((self.n_folds, t), np.nan)
        lam_used = np.full((self.n_folds, t), np.nan)
        for k in range(self.n_folds):
            test, train = self._folds[k], self._without(k)
            if test is None or train is None:
                continue
            if lam is not None:
                chosen = np.full(t, float(lam))
            elif nested:
                inner = [i for i in range(self.n_folds) if i != k and self._folds[i] is not None]
                if len(inner) < 2:
                    raise ValueError("nested CV needs at least 3 non-empty folds")
                chosen = grid[np.argmin(self._cv_sse(grid, inner), axis=0)]
            else:
                chosen = chosen_all
            uniq = np.unique(chosen)
            coef, icpt = _ridge_path(train, uniq)
            err = _sse(test, coef, icpt)  # [n_uniq, t]
            pick = np.searchsorted(uniq, chosen)
            sse[k] = err[pick, np.arange(t)]
            sst[k] = _sst(test, train)
            lam_used[k] = chosen
        with np.errstate(all="ignore"):
            r2 = 1.0 - np.nansum(sse, axis=0) / np.nansum(sst, axis=0)
        return RidgeCV(r2=r2, lam=lam_used, sse=sse, sst=sst, nested=lam is None and nested)

    def fit(
        self, lam: float | None = None, lambdas: Sequence[float] = DEFAULT_LAMBDAS
    ) -> RidgeDecoder:
        """Fit on all rows; ``lam=None`` chooses it by grouped CV (the same for every output)."""
        stats = self.stats
        if lam is None:
            if self.n_folds < 2:
                raise ValueError("pass lam=, or use n_folds >= 2 to choose it by cross-validation")
            grid = np.asarray(lambdas, dtype=np.float64)
            lam = float(grid[np.argmin(self._cv_sse(grid, range(self.n_folds)).sum(axis=1))])
        coef, icpt = _ridge_path(stats, np.array([lam]))
        prov = DecoderProvenance(
            kind="ridge",
            target=self.target,
            layer=self.layer,
            lam=float(lam),
            n_train=stats.n,
            d_model=int(stats.mean_x.shape[0]),
            n_outputs=int(stats.mean_y.shape[0]),
            model_id=self.model_id,
            belieflenspackage_version=package_version(),
        )
        scalar = bool(self._scalar)
        return RidgeDecoder(coef=coef[0], intercept=icpt[0], scalar=scalar, provenance=prov)
