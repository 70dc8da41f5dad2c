"""Cross-validation folds grouped by episode, and episode-level shuffled control targets."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from belieflens.errors import ParameterError

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def group_folds(groups: ArrayLike, n_folds: int, rng: np.random.Generator) -> I64:
    """Assign each row a fold in ``0 .. n_folds-1`` so that every group lies in one fold.

    Groups (e.g. episodes) are shuffled by ``rng`` and dealt round-robin, so folds
    hold equal numbers of groups (±1).
    """
    g = np.asarray(groups).ravel()
    uniq, inverse = np.unique(g, return_inverse=True)
    if n_folds < 2:
        raise ParameterError(f"option 'n_folds' = {n_folds} is not allowed: 2 or more")
    if uniq.size < n_folds:
        raise ParameterError(
            f"option 'n_folds' = {n_folds} is not allowed: the held-out folds are whole "
            f"episodes and there are {uniq.size}; pass n_folds={max(2, uniq.size)} or fewer "
            "(CLI: --folds)")
    fold_of_group = np.empty(uniq.size, dtype=np.int64)
    fold_of_group[rng.permutation(uniq.size)] = np.arange(uniq.size) % n_folds
    return np.asarray(fold_of_group[inverse], dtype=np.int64)


def fold_split(folds: ArrayLike, k: int) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Boolean masks ``(train, test)`` for fold ``k``: test = rows in fold ``k``."""
    f = np.asarray(folds)
    test = f == k
    return ~test, test


def shuffle_by_group(target: ArrayLike, groups: ArrayLike, rng: np.random.Generator) -> F64:
    """Control targets: each group takes the targets of another group (a seeded permutation).

    The ``i``-th row of group ``g`` (in order of appearance) gets the ``i``-th row of
    group ``π(g)``, cycling if ``π(g)`` has fewer rows. With groups of equal size (the
    usual case: same turns, probes and rotations per episode) this is an exact
    permutation of the rows that keeps each episode's targets together.
    """
    y = np.asarray(target, dtype=np.float64)
    g = np.asarray(groups).ravel()
    if y.shape[0] != g.shape[0]:
        raise ValueError(f"target has {y.shape[0]} rows but groups has {g.shape[0]}")
    uniq, inverse = np.unique(g, return_inverse=True)
    members = [np.flatnonzero(inverse == i) for i in range(uniq.size)]
    perm = rng.permutation(uniq.size)
    out = np.empty_like(y)
    for i, rows in enumerate(members):
        src = members[perm[i]]
        out[rows] = y[src[np.arange(rows.size) % src.size]]
    return out
