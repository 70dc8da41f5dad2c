"""The one ridge estimator of every linear read-out: belief geometry and ridge decoders.

An affine ridge regression from features ``x [n, d]`` to a target ``y [n, t]``, scored on
held-out whole groups (episodes):

- **standardised features**: each feature divided by its standard deviation on the training
  rows (:class:`~belieflens.analysis.decoders.ridge.RidgeStats`, eigen-decomposed once per
  training set), so one penalty grid fits features of any scale;
- **λ by nested cross-validation**: for each outer fold, the penalty is the one of
  :data:`~belieflens.analysis.decoders.ridge.DEFAULT_LAMBDAS` whose leave-one-fold-out error
  over the *other* folds (the outer fold's training rows only) is lowest, summed over the
  target's coordinates; the outer fold is then predicted by the fit on all its training rows
  with that λ. The outer test fold never takes part in choosing its λ, and every λ is
  reported (``lam [fold]``);
- **permutation nulls**: the same fit, nested λ included, onto ``permutations`` targets whose
  whole trajectories are permuted between episodes
  (:func:`~belieflens.analysis.decoders.folds.shuffle_by_group`); the p-value is
  ``(1 + #{null R² ≥ R²}) / (1 + permutations)``.

R² is pooled over the target's coordinates: ``1 − SSE / SST`` with SST about the target's
mean over all rows; the held-out predictions (``pred``) give it row by row, so an interval
over resampled episodes is a sum of per-episode terms (:func:`episode_sums`).

The nulls ride along as extra outputs of the same sufficient statistics, so 20 permutations
cost about one fit's eigen-decompositions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from belieflens.analysis.decoders.folds import shuffle_by_group
from belieflens.analysis.decoders.ridge import (
    DEFAULT_LAMBDAS,
    RidgeFitter,
    RidgeStats,
    _ridge_path,
    _sse,
)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

NULL_PERMUTATIONS = 20
"""Permutations of whole belief trajectories between episodes behind every null."""


@dataclass(frozen=True, eq=False)
class RidgeHeldOut:
    """A nested-CV ridge fit's held-out result (:func:`ridge_heldout`)."""

    pred: F64
    """Held-out predictions ``[n, t]``: each row from the fit that never saw its episode."""
    lam: F64
    """The penalty chosen for each outer fold ``[n_folds]`` (inside its training folds)."""
    r2: float
    """Held-out R², pooled over the target's coordinates."""
    mse: float
    """Held-out mean squared error per coordinate."""
    null_r2: F64
    """Held-out R² onto each permuted target ``[permutations]`` (each with its own λ)."""

    @property
    def p_value(self) -> float:
        """``(1 + #{null ≥ r2}) / (1 + permutations)``; NaN without nulls."""
        if self.null_r2.size == 0:
            return float("nan")
        return float((1 + np.sum(self.null_r2 >= self.r2)) / (1 + self.null_r2.size))


def null_targets(y: ArrayLike, groups: ArrayLike, rng: np.random.Generator,
                 permutations: int = NULL_PERMUTATIONS) -> list[F64]:
    """``permutations`` targets, each ``y`` with whole groups' trajectories permuted."""
    return [shuffle_by_group(y, groups, rng) for _ in range(permutations)]


def _loo_sse(stats: Sequence[RidgeStats | None], among: Sequence[int], lambdas: F64) -> F64:
    """Summed leave-one-fold-out SSE ``[n_lambda, outputs]`` over the folds ``among``."""
    total = np.zeros((lambdas.size, 0))
    for j in among:
        test = stats[j]
        train = RidgeStats.combine(stats[i] for i in among if i != j)
        if test is None or train is None:
            continue
        coef, icpt = _ridge_path(train, lambdas)
        sse = _sse(test, coef, icpt)
        total = sse if total.shape[1] == 0 else total + sse
    if total.shape[1] == 0:
        raise ValueError("nested cross-validation needs at least 3 non-empty folds")
    return total


def ridge_heldout(
    x: ArrayLike,
    y: ArrayLike,
    folds: ArrayLike,
    *,
    nulls: Sequence[ArrayLike] = (),
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
) -> RidgeHeldOut:
    """Held-out ridge predictions of ``y [n, t]`` from ``x [n, d]`` by nested CV over
    ``folds [n]`` (whole episodes per fold, at least 3 folds), and the held-out R² of the
    same fit onto each target of ``nulls`` (module docstring)."""
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    ya = ya[:, None] if ya.ndim == 1 else ya
    f = np.asarray(folds, dtype=np.int64).ravel()
    t, blocks = ya.shape[1], 1 + len(nulls)
    y_all = np.concatenate([ya, *(np.asarray(v, dtype=np.float64).reshape(ya.shape)
                                  for v in nulls)], axis=1)
    n_folds = int(f.max()) + 1
    fitter = RidgeFitter(n_folds)
    fitter.update(xa, y_all, f)
    stats = fitter.fold_stats
    grid = np.asarray(lambdas, dtype=np.float64)
    centre = fitter.stats.mean_y
    sse = np.zeros(blocks)
    sst = np.zeros(blocks)
    pred = np.full_like(ya, np.nan)
    lam_used = np.full(n_folds, np.nan)
    for k in range(n_folds):
        test = stats[k]
        inner = [i for i in range(n_folds) if i != k and stats[i] is not None]
        train = RidgeStats.combine(stats[i] for i in inner)
        if test is None or train is None:
            continue
        if len(inner) < 2:
            raise ValueError("nested cross-validation needs at least 3 non-empty folds")
        per_block = _loo_sse(stats, inner, grid).reshape(grid.size, blocks, t).sum(axis=2)
        chosen = np.argmin(per_block, axis=0)  # [blocks]
        used = np.unique(chosen)
        coef, icpt = _ridge_path(train, grid[used])
        err = _sse(test, coef, icpt).reshape(used.size, blocks, t).sum(axis=2)
        sse += err[np.searchsorted(used, chosen), np.arange(blocks)]
        d = test.mean_y - centre
        sst += (test.syy + test.n * d * d).reshape(blocks, t).sum(axis=1)
        at = int(np.searchsorted(used, chosen[0]))
        rows = f == k
        pred[rows] = xa[rows] @ coef[at][:, :t] + icpt[at][:t]
        lam_used[k] = grid[chosen[0]]
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = 1.0 - sse / sst
    return RidgeHeldOut(pred=pred, lam=lam_used, r2=float(r2[0]), mse=float(sse[0] / ya.size),
                        null_r2=np.asarray(r2[1:], dtype=np.float64))


@dataclass(frozen=True, eq=False)
class EpisodeSums:
    """Per-episode sums behind a held-out R² (:func:`episode_sums`): resampling episodes
    with replacement and adding their sums gives the R² of the resample exactly."""

    n: F64
    """Rows per episode ``[episode]``."""
    y_sum: F64
    """Σ y per episode ``[episode, t]``."""
    y_sq: F64
    """Σ ||y||² per episode ``[episode]``."""
    sse: F64
    """Σ ||y − pred||² per episode ``[episode]``."""

    def r2(self, weights: ArrayLike | None = None) -> F64:
        """R² of the episodes taken ``weights [..., episode]`` times each (all once: the
        held-out R²); ``[...]``."""
        w = np.ones_like(self.n) if weights is None else np.asarray(weights, dtype=np.float64)
        n = w @ self.n
        s = w @ self.y_sum
        sst = w @ self.y_sq - np.sum(s * s, axis=-1) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(1.0 - (w @ self.sse) / sst, dtype=np.float64)


def episode_sums(y: ArrayLike, pred: ArrayLike, episodes: ArrayLike,
                 order: ArrayLike) -> EpisodeSums:
    """The sums of :class:`EpisodeSums` for the episodes ``order`` (each an id of
    ``episodes [n]``; one with no rows gets zeros)."""
    ya = np.asarray(y, dtype=np.float64)
    ya = ya[:, None] if ya.ndim == 1 else ya
    pa = np.asarray(pred, dtype=np.float64).reshape(ya.shape)
    ep = np.asarray(episodes).ravel()
    ids = np.asarray(order).ravel()
    at = np.searchsorted(ids, ep) if np.all(ids[:-1] <= ids[1:]) else np.array(
        [int(np.flatnonzero(ids == e)[0]) for e in ep])
    m = ids.size
    n = np.bincount(at, minlength=m).astype(np.float64)
    y_sum = np.stack([np.bincount(at, weights=ya[:, c], minlength=m)
                      for c in range(ya.shape[1])], axis=1)
    y_sq = np.bincount(at, weights=np.sum(ya * ya, axis=1), minlength=m)
    sse = np.bincount(at, weights=np.sum((ya - pa) ** 2, axis=1), minlength=m)
    return EpisodeSums(n=n, y_sum=y_sum, y_sq=y_sq, sse=sse)
