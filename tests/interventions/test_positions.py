"""Erasure at every position: an eraser per position role. The two-axis construction (two
positions carrying the concept along different axes) is read at chance at every position
after it, on held-out folds, where one eraser of the pooled concept left each position
readable."""

from __future__ import annotations

import numpy as np
import torch
from concept_erasure import LeaceFitter

from belieflens.interventions.directions import Eraser, eraser_of, leace
from belieflens.interventions.positions import (
    RoleErasers,
    RoleIndex,
    RoleStats,
    heldout_position_r2,
    random_role_erasers,
    role_erasers,
    row_roles,
)
from belieflens.readouts.render import QUESTION, TEMPLATE, TokenizedQuery

D, ROWS, FOLDS = 16, 600, 5


def two_axis(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per read-out two positions (roles 0 and 1): the concept along axis 0 at the first,
    along axis 1 at the second, with noise; ``x [rows, 2, d]``, the concept, the folds."""
    c = rng.uniform(0.0, 1.0, ROWS)
    x = rng.normal(0.0, 0.13, (ROWS, 2, D))
    x[:, 0, 0] += c
    x[:, 1, 1] += c
    x[:, 1] += 3.0  # the positions differ in their mean too
    folds = np.arange(ROWS) % FOLDS
    return x, c, folds


def per_position_r2(x: np.ndarray, c: np.ndarray, folds: np.ndarray,
                    erasers: list[Eraser] | list[RoleErasers] | None) -> list[float]:
    """Held-out R² of a decoder at each position, after each fold's eraser (fitted without
    that fold) was applied to that fold's read-outs (the erasure ``erase --at all`` runs)."""
    out = []
    for pos in range(x.shape[1]):
        xe = x[:, pos].copy()
        for k, er in enumerate(erasers or []):
            xk = x[folds == k, pos]
            if isinstance(er, RoleErasers):
                xe[folds == k] = er.apply(xk, np.full(len(xk), pos))
            elif isinstance(er, Eraser):
                xe[folds == k] = er.apply(xk)
        out.append(heldout_position_r2(xe, c, folds))
    return out


def per_role(x: np.ndarray, c: np.ndarray, folds: np.ndarray) -> list[RoleErasers]:
    """One set of role erasers per fold, fitted on the other folds' positions."""
    stats = [RoleStats(D, 2) for _ in range(FOLDS)]
    for i in range(ROWS):
        stats[folds[i]].update(x[i], np.array([0, 1]), float(c[i]))
    return [role_erasers(stats[0].merged([s for j, s in enumerate(stats) if j != k]))
            for k in range(FOLDS)]


def test_the_two_axis_construction_is_at_chance_at_every_position_after_erasure() -> None:
    x, c, folds = two_axis(np.random.default_rng(0))
    before = per_position_r2(x, c, folds, None)
    assert min(before) > 0.75, before
    pooled = [leace(x[folds != k].reshape(-1, D), np.repeat(c[folds != k], 2))
              for k in range(FOLDS)]  # the concept alone, pooled over positions: not enough
    assert min(per_position_r2(x, c, folds, pooled)) > 0.3
    mine = per_role(x, c, folds)
    after = per_position_r2(x, c, folds, mine)
    assert max(after) <= 0.05, after
    assert all(e.rank == 1 and e.roles == 2 for e in mine)  # one direction at each position
    control = per_position_r2(x, c, folds, [random_role_erasers(e, np.random.default_rng(k))
                                            for k, e in enumerate(mine)])
    assert min(control) > 0.5  # a random direction of the same rank leaves it readable


def test_a_role_eraser_is_concept_erasures_on_that_roles_positions() -> None:
    """The sums handed to ``concept_erasure`` give the eraser its own ``update`` gives on
    the role's positions alone; within each role no covariance with the concept is left."""
    rng = np.random.default_rng(1)
    n = 300
    x = rng.normal(size=(n, 2, 8)) + rng.normal(size=8)
    c = rng.uniform(size=n)
    x[:, 0, :2] += c[:, None]
    x[:, 1, 3] -= 2 * c
    role = np.array([0, 2])
    stats = RoleStats(8, 3)
    for i in range(n):
        stats.update(x[i], role, float(c[i]))
    mine = role_erasers(stats)
    assert mine.roles == 2 and not mine.left[1].any()  # role 1 has no positions
    for pos, r in enumerate(role):
        fitter = LeaceFitter(8, 1, method="orth", dtype=torch.float64, svd_tol=1e-12)
        fitter.update(torch.as_tensor(x[:, pos]), torch.as_tensor(c[:, None]))
        theirs = eraser_of(fitter, 8)
        got = mine.apply(x[:, pos], np.full(n, r))
        np.testing.assert_allclose(got, theirs.apply(x[:, pos]), atol=1e-9)
        cov = (got - got.mean(0)).T @ (c - c.mean())
        assert float(np.abs(cov).max()) < 1e-9


def test_roles_follow_the_spans_and_rare_roles_share_their_kind() -> None:
    q = TokenizedQuery((5, 1, 7, 8), ((9, 4),), (0,), "", (TEMPLATE, 1, TEMPLATE, QUESTION))
    keys = row_roles(q, 5)
    assert keys[1] == ((1, 0, 0), 0) and keys[-1] == ("cont", 0)
    index = RoleIndex.of([keys] * 4 + [[*keys[:1], ((2, 0, 0), 0)]])
    assert index.size == 6  # five roles of their own, one kind for the rare evidence
    assert index.columns[((2, 0, 0), 0)] == index.columns[("kind", 2, 0)]
