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

A single fit on given training rows (:func:`ridge_map`, the interventions' belief reads and
directions) chooses its λ the same way, by leave-one-fold-out over those rows' own folds,
and reports it: fitted on an outer fold's training rows with the other outer folds as its
folds, it is the fit :func:`ridge_heldout` makes for that outer fold, λ included.

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
from belieflens.analysis.decoders.softmax import FIT_BLAS_LIMIT

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

NULL_PERMUTATIONS = 20
"""Permutations of whole belief trajectories between episodes behind every null."""

FALLBACK_LAM = 1e-2
"""The penalty of :func:`ridge_map` on rows of a single fold (one episode), where no λ can be
cross-validated: mild on standardised features (λ is relative to their unit variance)."""


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


@dataclass(frozen=True, eq=False)
class RidgeMap:
    """An affine ridge map ``y ≈ x @ weight + intercept`` in raw feature units, and the
    penalty it was fitted with (:func:`ridge_map`)."""

    weight: F64
    """``[d, t]``: a direction ``v [d]`` in the features moves the read by ``v @ weight``."""
    intercept: F64
    """``[t]``."""
    lam: float
    """The penalty (on standardised features) it was fitted with."""
    cv: bool
    """Whether ``lam`` was chosen by cross-validation (else :data:`FALLBACK_LAM`)."""

    def __call__(self, x: ArrayLike) -> F64:
        """The map at rows ``x [n, d]`` -> ``[n, t]``."""
        return np.asarray(np.asarray(x, dtype=np.float64) @ self.weight + self.intercept,
                          dtype=np.float64)


def ridge_map(x: ArrayLike, y: ArrayLike, folds: ArrayLike, *,
              lambdas: Sequence[float] = DEFAULT_LAMBDAS) -> RidgeMap:
    """The ridge map of ``y [n, t]`` (or ``[n]``) on ``x [n, d]``, fitted on all these rows
    with the λ of ``lambdas`` whose leave-one-fold-out error over ``folds [n]`` (ints ≥ 0,
    whole episodes per fold; they need not be consecutive) is lowest, summed over the
    target's coordinates. Rows of a single fold get :data:`FALLBACK_LAM` (``cv`` False).

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(60, 3))
        >>> y = x @ np.array([[1.0], [0.0], [-2.0]]) + 0.01 * rng.normal(size=(60, 1))
        >>> fit = ridge_map(x, y, np.arange(60) // 12)
        >>> np.round(fit.weight[:, 0], 2).tolist(), fit.cv, fit.lam in DEFAULT_LAMBDAS
        ([1.0, 0.0, -2.0], True, True)
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = _as_2d(y)
    f = np.asarray(folds, dtype=np.int64).ravel()
    if f.size == 0:
        raise ValueError("ridge_map needs at least one row")
    fitter = RidgeFitter(int(f.max()) + 1)
    grid = np.asarray(lambdas, dtype=np.float64)
    with FIT_BLAS_LIMIT:
        fitter.update(xa, ya, f)
        among = [i for i, s in enumerate(fitter.fold_stats) if s is not None]
        cv = len(among) >= 2
        lam = float(grid[np.argmin(_loo_sse(fitter.fold_stats, among, grid).sum(axis=1))]
                    ) if cv else FALLBACK_LAM
        coef, icpt = _ridge_path(fitter.stats, np.array([lam]))
    return RidgeMap(weight=coef[0], intercept=icpt[0], lam=lam, cv=cv)


def fold_maps(fitter: RidgeFitter, *, lambdas: Sequence[float] = DEFAULT_LAMBDAS
              ) -> list[RidgeMap | None]:
    """The map of each outer fold of a nested CV over ``fitter``'s folds (at least 3 with
    rows): fold ``k``'s map is :func:`ridge_map` on every other fold's rows, its λ chosen by
    leave-one-fold-out over those folds, so predicting fold ``k``'s rows with it gives
    :func:`ridge_heldout`'s held-out predictions (``None`` for a fold without rows). The
    fitter's statistics may have been streamed in (``update`` block by block)."""
    stats = fitter.fold_stats
    grid = np.asarray(lambdas, dtype=np.float64)
    cache: Paths = {}
    out: list[RidgeMap | None] = []
    with FIT_BLAS_LIMIT:
        for k, test in enumerate(stats):
            inner = [i for i in range(len(stats)) if i != k and stats[i] is not None]
            train = RidgeStats.combine(stats[i] for i in inner)
            if test is None or train is None:
                out.append(None)
                continue
            if len(inner) < 2:
                raise ValueError("nested cross-validation needs at least 3 non-empty folds")
            lam = float(grid[np.argmin(_loo_sse(stats, inner, grid, cache).sum(axis=1))])
            coef, icpt = _ridge_path(train, np.array([lam]))
            out.append(RidgeMap(weight=coef[0], intercept=icpt[0], lam=lam, cv=True))
    return out


def null_targets(y: ArrayLike, groups: ArrayLike, rng: np.random.Generator,
                 permutations: int = NULL_PERMUTATIONS) -> list[F64]:
    """``permutations`` targets, each ``y`` with whole groups' trajectories permuted."""
    return [shuffle_by_group(y, groups, rng) for _ in range(permutations)]


Paths = dict[tuple[int, ...], tuple[F64, F64]]
"""Ridge paths over a penalty grid by the training folds they were fitted on: the fits of the
inner folds of one outer fold are those of others (the fit on all folds but ``{j, k}`` serves
outer fold ``k``'s inner fold ``j`` and outer fold ``j``'s inner fold ``k``), so a nested CV
decomposes each set of training folds once."""


def _path(stats: Sequence[RidgeStats | None], train_folds: tuple[int, ...], lambdas: F64,
          cache: Paths | None) -> tuple[F64, F64] | None:
    """The ridge path of the folds ``train_folds`` (from ``cache`` when it holds it)."""
    if cache is not None and train_folds in cache:
        return cache[train_folds]
    train = RidgeStats.combine(stats[i] for i in train_folds)
    if train is None:
        return None
    out = _ridge_path(train, lambdas)
    if cache is not None:
        cache[train_folds] = out
    return out


def _loo_sse(stats: Sequence[RidgeStats | None], among: Sequence[int], lambdas: F64,
             cache: Paths | None = None) -> F64:
    """Summed leave-one-fold-out SSE ``[n_lambda, outputs]`` over the folds ``among``
    (``cache``: the paths of earlier calls on the same statistics and grid)."""
    total = np.zeros((lambdas.size, 0))
    for j in among:
        test = stats[j]
        path = _path(stats, tuple(sorted(i for i in among if i != j)), lambdas, cache)
        if test is None or path is None:
            continue
        coef, icpt = path
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
    return ridge_heldout_many(x, [(y, nulls)], folds, lambdas=lambdas)[0]


def _as_2d(v: ArrayLike) -> F64:
    a = np.asarray(v, dtype=np.float64)
    return a[:, None] if a.ndim == 1 else a


def ridge_heldout_many(
    x: ArrayLike,
    targets: Sequence[tuple[ArrayLike, Sequence[ArrayLike]]],
    folds: ArrayLike,
    *,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
) -> list[RidgeHeldOut]:
    """:func:`ridge_heldout` of several ``(target, nulls)`` from the same features and folds
    at once: each fit is the one :func:`ridge_heldout` makes alone (its own λ per fold), and
    the features' eigen-decompositions are shared."""
    xa = np.asarray(x, dtype=np.float64)
    f = np.asarray(folds, dtype=np.int64).ravel()
    blocks = [_as_2d(v) for y, nulls in targets for v in (y, *nulls)]
    owner = np.repeat(np.arange(len(targets)), [1 + len(n) for _, n in targets])
    widths = np.array([b.shape[1] for b in blocks])
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    n_folds = int(f.max()) + 1
    fitter = RidgeFitter(n_folds)
    with FIT_BLAS_LIMIT:
        fitter.update(xa, np.concatenate(blocks, axis=1), f)
        sse, sst, lam, pred = _nested(fitter, xa, f, starts, blocks, owner,
                                      np.asarray(lambdas, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = 1.0 - sse / sst
    out = []
    for i in range(len(targets)):
        at = np.flatnonzero(owner == i)
        first = int(at[0])
        out.append(RidgeHeldOut(pred=pred[first], lam=lam[first], r2=float(r2[first]),
                                mse=float(sse[first] / blocks[first].size),
                                null_r2=np.asarray(r2[at[1:]], dtype=np.float64)))
    return out


def _nested(fitter: RidgeFitter, x: F64, f: I64, starts: NDArray[np.int64],
            blocks: Sequence[F64], owner: I64,
            grid: F64) -> tuple[F64, F64, NDArray[np.float64], dict[int, F64]]:
    """The nested-CV loop of :func:`ridge_heldout_many`: per block the summed held-out SSE,
    SST about its overall mean, λ per fold, and the held-out predictions of each target
    (the first block of each owner)."""
    stats = fitter.fold_stats
    n_folds, n_blocks = len(stats), len(blocks)
    centre = fitter.stats.mean_y
    sse, sst = np.zeros(n_blocks), np.zeros(n_blocks)
    lam = np.full((n_blocks, n_folds), np.nan)
    firsts = [int(np.flatnonzero(owner == i)[0]) for i in range(int(owner.max()) + 1)]
    pred = {b: np.full_like(blocks[b], np.nan) for b in firsts}
    cache: Paths = {}
    for k in range(n_folds):
        test = stats[k]
        inner = [i for i in range(n_folds) if i != k and stats[i] is not None]
        train = RidgeStats.combine(stats[i] for i in inner)
        if test is None or train is None:
            continue
        if len(inner) < 2:
            raise ValueError("nested cross-validation needs at least 3 non-empty folds")
        per_block = np.add.reduceat(_loo_sse(stats, inner, grid, cache), starts, axis=1)
        chosen = np.argmin(per_block, axis=0)  # [blocks]
        used = np.unique(chosen)
        coef, icpt = _ridge_path(train, grid[used])
        err = np.add.reduceat(_sse(test, coef, icpt), starts, axis=1)
        pick = np.searchsorted(used, chosen)
        sse += err[pick, np.arange(n_blocks)]
        d = test.mean_y - centre
        sst += np.add.reduceat(test.syy + test.n * d * d, starts)
        lam[:, k] = grid[chosen]
        rows = f == k
        for b in firsts:
            cols = slice(int(starts[b]), int(starts[b]) + blocks[b].shape[1])
            pred[b][rows] = x[rows] @ coef[pick[b]][:, cols] + icpt[pick[b]][cols]
    return sse, sst, lam, pred


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
    def total(w: F64 | None = None) -> F64:
        return np.asarray(np.bincount(at, weights=w, minlength=m), dtype=np.float64)

    return EpisodeSums(n=total(), y_sum=np.stack([total(ya[:, c]) for c in range(ya.shape[1])],
                                                 axis=1),
                       y_sq=total(np.sum(ya * ya, axis=1)), sse=total(np.sum((ya - pa) ** 2,
                                                                             axis=1)))
