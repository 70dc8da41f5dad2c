"""The coin flip's exact posterior when the coin may be swapped and the flips are reported by
observers who may be wrong.

The coin's bias has the prior π = Beta(a0, b0). Before each flip, with probability ``hazard``
the coin is swapped for a fresh one drawn from π (a change-point). Each flip ``x`` lands on the
first face (1) or the second (0) and is reported as ``y``, right with the reported
reliability ``ρ`` (``ρ = 1``: the flip itself). The belief about the coin now in use (the one
that landed the last flip) after reports ``y_1..y_n`` is

    p_n(θ) ∝ [(1 − hazard) p_{n−1}(θ) + hazard π(θ)] · P(y_n | θ)^S,   p_0 = π,

where ``P(y | θ) = ρ θ + (1 − ρ)(1 − θ)`` for a report of the first face (``1 − ...`` for
the second) and ``S`` weights the evidence (1: the exact posterior; below 1 a partial updater,
:class:`~belieflens.episodes.capabilities.Temperable`). The next flip is the first face with
probability ``(1 − hazard) E_p[θ] + hazard E_π[θ]``.

:class:`Filter` computes it exactly as a mixture of Betas: one component per run length ``r``
(flips since the last swap) and count ``k`` of first faces among the run's true flips
(``Beta(a0 + S·k, b0 + S·(r − k))``), the forward recursion of Adams & MacKay (2007) over the
run length, with the report noise marginalised over the true flip. Only when reports are noisy
and ``S`` is not 1 is the likelihood's power not a mixture of Betas; :class:`GridFilter` then
integrates on a fine grid of θ (within 1e-6 of the exact mixture at ``S = 1``, a test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Report:
    """One reported flip: ``face`` 1 (the first face) or 0, right with ``reliability``."""

    face: int
    reliability: float = 1.0


class Posterior(Protocol):
    """A belief about the coin in use that updates report by report."""

    def update(self, report: Report) -> None:
        """Condition on one more report."""
        ...

    def next_flip(self) -> tuple[float, float]:
        """The next flip's predictive: (P(first face), P(second face))."""
        ...

    def bins(self, bins: int) -> tuple[float, ...]:
        """The posterior mass of each of ``bins`` equal-width bins of the coin's bias."""
        ...


def _betaln(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy import special  # imported on use: it is slow to import

    out: np.ndarray = special.betaln(a, b)
    return out


class Filter:
    """The exact posterior as a mixture of Betas over (run length, count of first faces).

    Component ``j`` is the run of ``r[j]`` flips holding ``k[j]`` first faces, weight
    ``exp(log_w[j])``, Beta(a0 + S·k, b0 + S·(r − k)). Components below e^-40 of the largest
    are dropped (their total stays far below any difference a read-out resolves). Reports must
    be direct (reliability 1) unless ``strength`` is 1.
    """

    PRUNE = 40.0
    """Log-weight below the largest at which a component is dropped."""

    def __init__(self, a0: float, b0: float, *, hazard: float = 0.0,
                 strength: float = 1.0) -> None:
        self.a0, self.b0, self.hazard, self.strength = a0, b0, hazard, strength
        self.r = np.zeros(1, dtype=np.int64)
        self.k = np.zeros(1, dtype=np.int64)
        self.log_w = np.zeros(1)

    def _ab(self, r: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.strength
        return self.a0 + s * k, self.b0 + s * (r - k)

    def _log_lands(self, r: np.ndarray, k: np.ndarray, report: Report
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Per component: log P(this coin's flip lands first face and is reported so), and
        the same for the second face (the tempered likelihood's integral when direct)."""
        y, rho, s = report.face, report.reliability, self.strength
        a, b = self._ab(r, k)
        none = np.full(a.shape, -np.inf)
        if rho == 1.0:
            if y == 1:
                return _betaln(a + s, b) - _betaln(a, b), none
            return none, _betaln(a, b + s) - _betaln(a, b)
        if s != 1.0:
            raise ValueError("a tempered posterior of noisy reports is not a Beta mixture: "
                             "use GridFilter")
        right, wrong = np.log(rho), np.log1p(-rho)
        return (np.log(a / (a + b)) + (right if y == 1 else wrong),
                np.log(b / (a + b)) + (wrong if y == 1 else right))

    def update(self, report: Report) -> None:
        """Condition on one more report (the forward recursion over run lengths)."""
        first_flip = bool(self.r.max() == 0)
        swap = self.hazard > 0.0 and not first_flip
        stay = np.log1p(-self.hazard) if swap else 0.0
        lands_first, lands_second = self._log_lands(self.r, self.k, report)
        r = [self.r + 1, self.r + 1]
        k = [self.k + 1, self.k]
        lw = [stay + self.log_w + lands_first, stay + self.log_w + lands_second]
        if swap:  # a fresh coin from the prior lands this flip
            zero = np.zeros(1, dtype=np.int64)
            fresh_first, fresh_second = self._log_lands(zero, zero, report)
            total = np.log(self.hazard) + np.logaddexp.reduce(self.log_w)
            r += [zero + 1, zero + 1]
            k += [zero + 1, zero]
            lw += [total + fresh_first, total + fresh_second]
        self._merge(np.concatenate(r), np.concatenate(k), np.concatenate(lw))

    def _merge(self, r: np.ndarray, k: np.ndarray, lw: np.ndarray) -> None:
        """Sum the weights of equal (r, k), drop negligible ones, normalise."""
        keep = lw > lw.max() - self.PRUNE
        r, k, lw = r[keep], k[keep], lw[keep]
        key = r * (int(r.max()) + 2) + k
        order = np.argsort(key, kind="stable")
        key, r, k, lw = key[order], r[order], k[order], lw[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        merged = np.logaddexp.reduceat(lw, starts)
        self.r, self.k = r[starts], k[starts]
        self.log_w = merged - np.logaddexp.reduce(merged)

    def components(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The mixture: weights, a and b of each component."""
        a, b = self._ab(self.r, self.k)
        w = np.exp(self.log_w)
        return w / w.sum(), a, b

    def next_flip(self) -> tuple[float, float]:
        """``(1 − hazard) E[θ] + hazard E_π[θ]`` and its complement."""
        w, a, b = self.components()
        prior_mean = self.a0 / (self.a0 + self.b0)
        p = (1.0 - self.hazard) * float(w @ (a / (a + b))) + self.hazard * prior_mean
        return (p, 1.0 - p)

    def bins(self, bins: int) -> tuple[float, ...]:
        """Each equal-width bin's mass under the mixture."""
        from scipy import special

        w, a, b = self.components()
        edges = np.linspace(0.0, 1.0, bins + 1)
        cdf = special.betainc(a[:, None], b[:, None], edges[None, :])
        mass = w @ np.diff(cdf, axis=1)
        return tuple(float(x) for x in mass / mass.sum())


GRID_CELLS = 2520 * 8
"""Cells of :class:`GridFilter`'s grid: a multiple of every bin count 2..10, so bins are sums
of whole cells."""


class GridFilter:
    """The posterior on a grid of θ: each cell holds the prior's exact mass, and θ stands at the
    prior's mean within the cell (exact for a likelihood linear in θ; any reliability, any
    strength)."""

    def __init__(self, a0: float, b0: float, *, hazard: float = 0.0, strength: float = 1.0,
                 cells: int = GRID_CELLS) -> None:
        from scipy import special

        self.hazard, self.strength = hazard, strength
        edges = np.linspace(0.0, 1.0, cells + 1)
        self.prior = np.diff(special.betainc(a0, b0, edges))
        first = np.diff(special.betainc(a0 + 1.0, b0, edges)) * a0 / (a0 + b0)
        with np.errstate(invalid="ignore", divide="ignore"):
            within = first / self.prior
        middle = 0.5 * (edges[1:] + edges[:-1])
        self.theta = np.where(self.prior > 0, np.clip(within, edges[:-1], edges[1:]), middle)
        self.prior /= self.prior.sum()
        self.mass = self.prior.copy()
        self.prior_mean = a0 / (a0 + b0)

    def update(self, report: Report) -> None:
        """Mix in the swap, multiply by the tempered likelihood, renormalise."""
        rho = report.reliability
        p_first = rho * self.theta + (1.0 - rho) * (1.0 - self.theta)
        like = p_first if report.face == 1 else 1.0 - p_first
        mixed = (1.0 - self.hazard) * self.mass + self.hazard * self.prior
        m = mixed * np.power(like, self.strength)
        self.mass = m / m.sum()

    def next_flip(self) -> tuple[float, float]:
        """``(1 − hazard) E[θ] + hazard E_π[θ]`` on the grid."""
        p = (1.0 - self.hazard) * float(self.mass @ self.theta) + self.hazard * self.prior_mean
        return (p, 1.0 - p)

    def bins(self, bins: int) -> tuple[float, ...]:
        """Each bin's mass: the sum of its cells."""
        mass = self.mass.reshape(bins, -1).sum(axis=1)
        return tuple(float(x) for x in mass / mass.sum())


def posterior(a0: float, b0: float, *, hazard: float = 0.0, strength: float = 1.0,
              noisy: bool = False) -> Posterior:
    """The exact filter for these settings (:class:`Filter`; :class:`GridFilter` where noisy
    reports are tempered)."""
    if noisy and strength != 1.0:
        return GridFilter(a0, b0, hazard=hazard, strength=strength)
    return Filter(a0, b0, hazard=hazard, strength=strength)


def beliefs(a0: float, b0: float, reports: Sequence[Report], *, hazard: float = 0.0,
            strength: float = 1.0, bins: int = 5
            ) -> list[tuple[tuple[float, float], tuple[float, ...]]]:
    """(next flip, bias bins) before any report and after each one."""
    noisy = any(r.reliability != 1.0 for r in reports)
    post = posterior(a0, b0, hazard=hazard, strength=strength, noisy=noisy)
    out = [(post.next_flip(), post.bins(bins))]
    for r in reports:
        post.update(r)
        out.append((post.next_flip(), post.bins(bins)))
    return out
