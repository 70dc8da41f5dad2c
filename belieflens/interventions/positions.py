"""Erasure at every position: an eraser per position role.

A concept erased from the pooled positions of many read-outs can stay readable at each one:
two positions that carry it along different axes mix in the pool, and one eraser of the
mixture leaves a decoder at either position most of its R². ``erase --at all`` therefore fits
**one eraser per position role**, each on that role's positions only, and applies at each
position its role's eraser: within every role the residual no longer covaries with the
concept, so no linear decoder at any role reads it (on the data fitted; held out, the check
of :func:`belieflens.interventions.erase.erase_logprobs`). Each eraser removes one direction
(the concept is a scalar), so a position loses one dimension, not one per role.

The erasers are ``concept_erasure``'s ``LeaceFitter`` with its orthogonal method: the
direction of the role's cross-covariance, projected out around the role's mean. Its
guarantee is LEACE's (zero covariance with the concept, so a linear decoder does no better
than a constant); it needs no ``d × d`` covariance per role, which roles × folds × layers
would not fit in memory. (The alternative, one LEACE eraser of the concept crossed with the
role, erases as many directions at every position as there are roles whose directions differ:
on a 64-wide model with 161 roles it removed all 64.) Every non-zero cross-covariance is erased
(``svd_tol`` :data:`SVD_TOL`).

The **role** of a position is where it sits in the episode, by the renderer's spans
(:mod:`belieflens.interventions.align`): its segment (turn t's evidence, a template piece, the
question) and its offset in that segment; a continuation token of a multi-token option is its
offset after the answer position. Roles seen in fewer than :data:`MIN_ROLE_ROWS` read-outs, and
those beyond the :data:`MAX_ROLES` most frequent, share one eraser per kind of segment (turn t's
evidence, template, ...). The statistics are sums by role (count, ``Σ c``, ``Σ x``, ``Σ c x``)
per fold; each fold's erasers are fitted on the other folds' sums.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from belieflens.interventions.align import roles as span_roles
from belieflens.interventions.align import segments
from belieflens.readouts.render import TokenizedQuery

MIN_ROLE_ROWS = 4
"""Read-outs a role needs to get a column of its own (rarer roles share their kind's)."""

MAX_ROLES = 128
"""Most roles with a column of their own (the most frequent; the rest share their kind's)."""

RoleKey = tuple[Any, ...]
"""A position's role: ``(segment name, offset)``, ``("cont", offset)``, or a kind's
``("kind", code)``."""

F64 = NDArray[np.float64]


def row_roles(query: TokenizedQuery, n_tokens: int) -> list[RoleKey]:
    """The role of each of the first ``n_tokens`` positions of a forward row of ``query``:
    context positions by segment and offset, continuation tokens by offset after the
    context."""
    out: list[RoleKey] = []
    for name, a, b in segments(span_roles(query)):
        out += [(name, p - a) for p in range(a, b)]
    ctx = len(out)
    out += [("cont", k) for k in range(n_tokens - ctx)]
    return out[:n_tokens]


def _kind(key: RoleKey) -> RoleKey:
    """The shared role of a rare role: its segment's code (or a continuation)."""
    return ("kind", "cont") if key[0] == "cont" else ("kind", key[0][0], key[0][2])


@dataclass(frozen=True)
class RoleIndex:
    """Column of each role (module docstring: rare roles share their kind's column)."""

    columns: dict[RoleKey, int]

    @classmethod
    def of(cls, per_row: Sequence[Sequence[RoleKey]]) -> RoleIndex:
        """The columns of the roles of ``per_row`` (each read-out's roles)."""
        seen = Counter(k for keys in per_row for k in set(keys))
        own = [k for k, n in sorted(seen.items(), key=lambda kv: (-kv[1], repr(kv[0])))
               if n >= MIN_ROLE_ROWS][:MAX_ROLES]
        columns = {k: i for i, k in enumerate(own)}
        for k in sorted(seen, key=repr):
            if k not in columns:
                columns[k] = columns.setdefault(_kind(k), len(columns))
        return cls(columns)

    @property
    def size(self) -> int:
        """Number of columns."""
        return max(self.columns.values(), default=-1) + 1

    def ids(self, keys: Sequence[RoleKey]) -> NDArray[np.int64]:
        """The column of each role."""
        return np.array([self.columns[k] for k in keys], dtype=np.int64)


VARIANT = (
    "per position role, concept_erasure's LeaceFitter with method='orth': the direction of the "
    "role's cross-covariance with the concept projected out around the role's mean. Not full "
    "LEACE, whose eraser also whitens by the role's d x d covariance: one per role, fold and "
    "layer would not fit in memory. The guarantee is LEACE's (within every role no linear "
    "covariance with the concept is left); the edit is an orthogonal projection, not LEACE's "
    "least-change oblique one")
"""What the erasers of ``at="all"`` are, and why, as the result file and its report name
them."""

SVD_TOL = 1e-12
"""``LeaceFitter``'s ``svd_tol``: a role's cross-covariance is erased unless it is this small."""


@dataclass
class RoleStats:
    """Sums by role of one layer and one fold (mutable accumulator; :meth:`merged` adds)."""

    d: int
    r: int
    count: F64 = field(init=False)
    sc: F64 = field(init=False)
    sx: F64 = field(init=False)
    scx: F64 = field(init=False)

    def __post_init__(self) -> None:
        self.count, self.sc = np.zeros(self.r), np.zeros(self.r)
        self.sx, self.scx = np.zeros((self.r, self.d)), np.zeros((self.r, self.d))

    def update(self, x: F64, role: NDArray[np.int64], concept: float) -> None:
        """Add the positions ``x [n, d]`` of one read-out, of roles ``role [n]``."""
        np.add.at(self.count, role, 1.0)
        np.add.at(self.sc, role, concept)
        np.add.at(self.sx, role, x)
        np.add.at(self.scx, role, concept * x)

    def merged(self, others: Sequence[RoleStats]) -> RoleStats:
        """The sums of ``others`` (this one's shape)."""
        out = RoleStats(self.d, self.r)
        for o in others:
            for name in ("count", "sc", "sx", "scx"):
                setattr(out, name, getattr(out, name) + getattr(o, name))
        return out


@dataclass(frozen=True, eq=False)
class RoleErasers:
    """One affine eraser per role column, ``x -> x - left_r (right_r · (x - bias_r))``."""

    left: F64
    """``[roles, d]`` (0 where a role has nothing to erase)."""
    right: F64
    """``[roles, d]``."""
    bias: F64
    """``[roles, d]``."""

    @property
    def rank(self) -> int:
        """Directions removed at a position (1, or 0 when no role has any)."""
        return int(np.any(self.left != 0))

    @property
    def roles(self) -> int:
        """Roles whose eraser removes a direction."""
        return int(np.sum(np.any(self.left != 0, axis=1)))

    def apply(self, x: F64, role: NDArray[np.int64]) -> F64:
        """Erase positions ``x [n, d]`` of roles ``role [n]``."""
        dot = np.einsum("nd,nd->n", x - self.bias[role], self.right[role])
        return np.asarray(x - dot[:, None] * self.left[role], dtype=np.float64)

    def mean(self) -> F64:
        """The roles' means (``[roles, d]``), around which a control projects."""
        return self.bias


def role_erasers(stats: RoleStats) -> RoleErasers:
    """Each role's eraser from its sums: ``concept_erasure.LeaceFitter`` (orthogonal method)
    with the role's mean and centred cross-covariance set from them, then its ``eraser``."""
    import torch
    from concept_erasure import LeaceFitter

    left, right = np.zeros((stats.r, stats.d)), np.zeros((stats.r, stats.d))
    cnt = np.maximum(stats.count, 1.0)
    bias = stats.sx / cnt[:, None]
    for r in np.flatnonzero(stats.count >= 2):
        mean_c = stats.sc[r] / cnt[r]
        cross = stats.scx[r] - stats.count[r] * bias[r] * mean_c
        fitter = LeaceFitter(stats.d, 1, method="orth", dtype=torch.float64, svd_tol=SVD_TOL)
        fitter.n = torch.tensor(int(stats.count[r]))
        fitter.mean_x = torch.as_tensor(bias[r])
        fitter.mean_z = torch.tensor([mean_c], dtype=torch.float64)
        fitter.sigma_xz_ = torch.as_tensor(cross[:, None])
        eraser = fitter.eraser
        left[r] = eraser.proj_left.numpy()[:, 0]
        right[r] = eraser.proj_right.numpy()[0]
    return RoleErasers(left, right, bias)


def random_role_erasers(erasers: RoleErasers, rng: np.random.Generator) -> RoleErasers:
    """The control: per role that erases a direction, a random direction projected out around
    the role's mean instead."""
    v = rng.standard_normal(erasers.left.shape)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    on = np.any(erasers.left != 0, axis=1)[:, None]
    return RoleErasers(np.where(on, v, 0.0), np.where(on, v, 0.0), erasers.bias)


def heldout_position_r2(x: F64, y: F64, folds: NDArray[np.int64]) -> float:
    """Held-out R² of a ridge decoder of ``y [n]`` on ``x [n, d]`` over grouped ``folds``
    (:func:`~belieflens.interventions.directions.heldout_r2` without an eraser: ``x`` is
    what the eraser applied left). NaN with fewer than two folds or constant ``y``."""
    from belieflens.interventions.directions import heldout_r2

    if np.unique(folds).size < 2 or np.ptp(y) == 0:
        return float("nan")
    return heldout_r2(x, y, folds, erase=False)
