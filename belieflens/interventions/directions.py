"""Per-layer directions and erasers fitted on a study's residuals at the answer position.

The concept is each read-out's oracle point estimate
(:func:`belieflens.interventions.readouts.oracle_mean`: E[value] for numeric or range outcomes,
else P(first outcome); for coin flip both probes give the posterior mean of the bias).
Folds are grouped by episode (:func:`belieflens.analysis.decoders.group_folds`): the
read-outs of one episode share a context and are never split between fitting and testing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from belieflens.analysis.decoders import group_folds
from belieflens.analysis.decoders.estimator import ridge_heldout, ridge_map
from belieflens.analysis.decoders.ridge import DEFAULT_LAMBDAS
from belieflens.errors import ParameterError

F64 = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Direction:
    """A layer's steering direction: the ridge decoder's weight vector, normalised."""

    unit: F64
    """``[d_model]``, norm 1, oriented so that moving along it raises the decoder's output."""
    scale: float
    """Standard deviation of the residuals' projection on ``unit`` (α's unit)."""
    r2: float
    """Held-out R² of the decoder (grouped cross-validation; NaN with fewer than 3 groups)."""
    lam: float
    """The ridge penalty (on standardised features): chosen by grouped cross-validation over
    the fitting rows unless given (:data:`~belieflens.analysis.decoders.estimator.FALLBACK_LAM`
    with a single episode); 0 where no ridge is fitted."""
    gain: float = float("nan")
    """How far the decoded concept moves per unit of residual along ``unit`` (the decoder's
    weight norm); NaN where no decoder of the concept is fitted."""


def episode_folds(groups: Sequence[int] | NDArray[Any], n_folds: int, rng: np.random.Generator
                  ) -> tuple[NDArray[np.int64], int]:
    """Fold of each row (grouped by episode) and the number of folds actually used
    (``min(n_folds, number of episodes)``; all rows in fold 0 with a single episode)."""
    g = np.asarray(groups)
    k = min(n_folds, int(np.unique(g).size))
    if k < 2:
        return np.zeros(g.size, dtype=np.int64), 1
    return group_folds(g, k, rng), k


def decoder_direction(x: F64, y: F64, groups: Sequence[int] | NDArray[Any],
                      rng: np.random.Generator, *, n_folds: int = 5,
                      lam: float | None = None) -> Direction:
    """The ridge decoder of ``y [n]`` on ``x [n, d]`` as a :class:`Direction`, on the one
    estimator (:func:`~belieflens.analysis.decoders.estimator.ridge_map`: standardised
    features, the penalty chosen by leave-one-fold-out over ``n_folds`` folds of whole
    episodes of ``groups`` unless ``lam`` is given; a single episode gets
    :data:`~belieflens.analysis.decoders.estimator.FALLBACK_LAM`); ``r2`` is its held-out R²
    by nested cross-validation over the same folds
    (:func:`~belieflens.analysis.decoders.estimator.ridge_heldout`; NaN with fewer than 3)."""
    folds, k = episode_folds(groups, n_folds, rng)
    grid = DEFAULT_LAMBDAS if lam is None else (lam,)
    fit = ridge_map(x, y, folds, lambdas=grid)
    r2 = ridge_heldout(x, y, folds, lambdas=grid).r2 if k >= 3 else float("nan")
    w = np.asarray(fit.weight[:, 0], dtype=np.float64)
    norm = float(np.linalg.norm(w))
    unit = w / norm if norm > 0 else w
    scale = float(np.std(x @ unit)) if norm > 0 else 0.0
    return Direction(unit=unit, scale=scale, r2=r2, lam=fit.lam, gain=norm)


def diff_means_direction(x: F64, y: F64) -> Direction:
    """The difference of means of ``x [n, d]`` between the rows whose concept ``y [n]`` lies
    above its median and the others, normalised (zero when either side is empty or the means
    coincide), as a :class:`Direction` (``r2`` NaN, ``lam`` 0: no decoder is fitted).

    Examples:
        >>> x = np.array([[0.0, 1.0], [0.0, 3.0], [2.0, 1.0], [2.0, 3.0]])
        >>> diff_means_direction(x, np.array([0.1, 0.2, 0.8, 0.9])).unit.tolist()
        [1.0, 0.0]
    """
    high = y > np.median(y)
    if high.all() or not high.any():
        w = np.zeros(x.shape[1])
    else:
        w = x[high].mean(axis=0) - x[~high].mean(axis=0)
    norm = float(np.linalg.norm(w))
    unit = np.asarray(w / norm if norm > 0 else w, dtype=np.float64)
    scale = float(np.std(x @ unit)) if norm > 0 else 0.0
    return Direction(unit=unit, scale=scale, r2=float("nan"), lam=0.0)


def belief_direction(x: F64, beliefs: F64, state: int, groups: Sequence[int] | NDArray[Any],
                     rng: np.random.Generator, *, n_folds: int = 5,
                     decoder: bool = False) -> Direction:
    """The direction that raises the regressed belief in hidden state ``state``.

    The regression is ``ds.bl.geometry``'s estimator: an affine ridge map ``W`` from the
    residuals ``x [n, d]`` to the beliefs ``beliefs [n, S]`` on standardised features, its
    penalty chosen by leave-one-fold-out over ``n_folds`` folds of whole episodes of
    ``groups`` (:func:`~belieflens.analysis.decoders.estimator.ridge_map`; with a single
    episode no penalty can be cross-validated and it is
    :data:`~belieflens.analysis.decoders.estimator.FALLBACK_LAM`). The target move is
    ``t = e_state - 1/S`` (toward the simplex vertex of ``state``, the sum unchanged). The
    direction is

    - by default the **pattern**: how the residuals move with the belief, the least-squares
      ``P [S, d]`` of ``x`` on the beliefs, at ``t @ P`` (the residual change that comes with
      the belief change ``t`` in the data);
    - with ``decoder``, the least-norm residual shift whose read is ``t``: ``t @ pinv(W)``,
      which may lie along directions of little variance that the model never reads.

    Normalised; ``r2`` is the map's held-out R² over the same folds by nested
    cross-validation (:func:`~belieflens.analysis.decoders.estimator.ridge_heldout`; NaN with
    fewer than 3 folds); ``lam`` the penalty of ``W``.

    Examples:
        >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
        >>> b = np.stack([0.5 + 0.25 * (x[:, 0] - x[:, 1]), 0.5 - 0.25 * (x[:, 0] - x[:, 1])], 1)
        >>> d = belief_direction(x, b, 0, [0, 1, 2, 3], np.random.default_rng(0), n_folds=2)
        >>> np.round(d.unit, 6).tolist()
        [0.707107, -0.707107]
    """
    n_state = beliefs.shape[1]
    if not 0 <= state < n_state:
        raise ParameterError(f"--state = {state} is not allowed: a hidden state 0..{n_state - 1}")
    target = np.full(n_state, -1.0 / n_state)
    target[state] += 1.0
    folds, k = episode_folds(groups, n_folds, rng)
    fit = ridge_map(x, beliefs, folds)
    if decoder:
        w = target @ np.linalg.pinv(fit.weight)
    else:
        bc = beliefs - beliefs.mean(axis=0)
        w = target @ np.linalg.lstsq(bc, x - x.mean(axis=0), rcond=None)[0]
    norm = float(np.linalg.norm(w))
    unit = np.asarray(w / norm if norm > 0 else w, dtype=np.float64)
    scale = float(np.std(x @ unit)) if norm > 0 else 0.0
    r2 = ridge_heldout(x, beliefs, folds).r2 if k >= 3 else float("nan")
    return Direction(unit=unit, scale=scale, r2=r2, lam=fit.lam)


def random_unit(d: int, rng: np.random.Generator) -> F64:
    """A direction drawn uniformly on the unit sphere of ``R^d``."""
    v = rng.standard_normal(d)
    return np.asarray(v / np.linalg.norm(v), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Eraser:
    """An affine eraser ``x -> x - left @ right @ (x - bias)`` (LEACE or a control)."""

    left: F64
    """``[d, rank]``."""
    right: F64
    """``[rank, d]``."""
    bias: F64
    """``[d]``."""

    @property
    def rank(self) -> int:
        """Rank of the removed subspace."""
        return int(self.left.shape[1])

    def matrix(self) -> F64:
        """The linear part ``P = I - left @ right`` ``[d, d]``: ``x -> P (x - bias) + bias``."""
        return np.eye(self.left.shape[0]) - self.left @ self.right

    def apply(self, x: F64) -> F64:
        """Erase rows ``x [n, d]``."""
        return np.asarray(x - ((x - self.bias) @ self.right.T) @ self.left.T, dtype=np.float64)


def leace(x: F64, z: F64) -> Eraser:
    """The LEACE eraser of concept ``z [n]`` or ``[n, k]`` fitted on ``x [n, d]``
    (``concept_erasure.LeaceFitter``, float64)."""
    import torch
    from concept_erasure import LeaceFitter

    zz = z[:, None] if z.ndim == 1 else z
    fitter = LeaceFitter(x.shape[1], zz.shape[1], dtype=torch.float64)
    fitter.update(torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(zz,
                                                                           dtype=torch.float64))
    return eraser_of(fitter, x.shape[1])


def eraser_of(fitter: Any, d: int) -> Eraser:
    """The :class:`Eraser` of a ``concept_erasure.LeaceFitter`` that has seen its data
    (streamed: the fit over every position of many read-outs)."""
    import torch

    eraser = fitter.eraser
    bias = eraser.bias if eraser.bias is not None else torch.zeros(d, dtype=torch.float64)
    return Eraser(left=eraser.proj_left.numpy().astype(np.float64),
                  right=eraser.proj_right.numpy().astype(np.float64),
                  bias=bias.numpy().astype(np.float64))


def random_eraser(x: F64, rank: int, rng: np.random.Generator) -> Eraser:
    """Orthogonal erasure of a random ``rank``-dimensional subspace around the mean of ``x``
    (the control for an eraser of that rank)."""
    return random_eraser_at(x.mean(axis=0), rank, rng)


def random_eraser_at(mean: F64, rank: int, rng: np.random.Generator) -> Eraser:
    """Orthogonal erasure of a random ``rank``-dimensional subspace around ``mean``."""
    q, _ = np.linalg.qr(rng.standard_normal((mean.size, max(rank, 1))))
    q = q[:, :rank]
    return Eraser(left=q, right=q.T.copy(), bias=np.asarray(mean, dtype=np.float64))


def heldout_r2(x: F64, y: F64, folds: NDArray[np.int64], *, erase: bool) -> float:
    """Pooled held-out R² of a ridge decoder of ``y`` on ``x`` over grouped ``folds``; with
    ``erase`` a LEACE eraser is fitted on each training fold and applied to its training and
    test rows before the decoder (LEACE's guarantee: the decoder is then at chance, R² ≤ 0).
    The decoder of each outer fold is the one estimator's
    (:func:`~belieflens.analysis.decoders.estimator.ridge_map` on its training rows, the
    penalty chosen over their own folds: nested cross-validation)."""
    sse = sst = 0.0
    for k in np.unique(folds):
        test = folds == k
        train = ~test
        xtr, xte = x[train], x[test]
        if erase:
            er = leace(xtr, y[train])
            xtr, xte = er.apply(xtr), er.apply(xte)
        pred = ridge_map(xtr, y[train], folds[train])(xte)[:, 0]
        sse += float(np.sum((y[test] - pred) ** 2))
        sst += float(np.sum((y[test] - y[train].mean()) ** 2))
    return 1.0 - sse / sst if sst > 0 else float("nan")
