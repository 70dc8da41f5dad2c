"""Exact outcome distributions by enumeration, with integer weights.

A distribution is an :class:`Exact`: outcome values and integer weights, so that
probabilities are exact fractions (every scenario of the revealed-belief grids
has rational probabilities). Enumeration is brute force with numpy: every joint
draw is listed with its weight and the weights are summed per outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

ObservationKind = Literal["even", "odd", "smaller", "greater", "not-equal"]
"""What an observation says about a result."""


@dataclass(frozen=True)
class Exact:
    """An exact distribution over integer outcome ``values`` with integer ``weights``.

    Zero weights are allowed (an outcome ruled out by an observation) but the
    total must be positive.
    """

    values: tuple[int, ...]
    weights: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.values) != len(self.weights):
            raise ValueError("an Exact needs one weight per value")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"values must be distinct, got {self.values!r}")
        if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ValueError("weights must be >= 0 with a positive total")

    @property
    def probs(self) -> tuple[Fraction, ...]:
        """Exact probability of each value."""
        total = sum(self.weights)
        return tuple(Fraction(w, total) for w in self.weights)

    def floats(self) -> tuple[float, ...]:
        """Probabilities as floats (the oracle)."""
        return tuple(float(p) for p in self.probs)

    def prob(self, value: int) -> Fraction:
        """Exact probability of ``value`` (0 if it is not a listed outcome)."""
        return dict(zip(self.values, self.probs, strict=True)).get(value, Fraction(0))

    def nonzero(self) -> Exact:
        """The same distribution restricted to outcomes of positive weight."""
        kept = [(v, w) for v, w in zip(self.values, self.weights, strict=True) if w > 0]
        return Exact(tuple(v for v, _ in kept), tuple(w for _, w in kept))

    def argmax(self) -> int:
        """The most likely value (the first in value order among ties)."""
        best = max(self.weights)
        return self.values[self.weights.index(best)]

    def unique_mode(self) -> int | None:
        """The most likely value if exactly one value attains the maximum, else ``None``."""
        best = max(self.weights)
        if self.weights.count(best) != 1:
            return None
        return self.argmax()


def from_draws(outcomes: np.ndarray, weights: np.ndarray) -> Exact:
    """Sum the ``weights`` of enumerated joint draws per ``outcomes`` value.

    Values run over the full range ``min..max`` of the outcomes, so gaps get weight 0.
    """
    outcomes = np.asarray(outcomes, dtype=np.int64).ravel()
    weights = np.asarray(weights, dtype=np.int64).ravel()
    lo, hi = int(outcomes.min()), int(outcomes.max())
    summed = np.zeros(hi - lo + 1, dtype=np.int64)
    np.add.at(summed, outcomes - lo, weights)
    return Exact(tuple(range(lo, hi + 1)), tuple(int(w) for w in summed))


def dice_sum(n_dice: int, faces: int) -> Exact:
    """Distribution of the sum of ``n_dice`` fair dice with faces ``1..faces``."""
    if n_dice < 1 or faces < 2:
        raise ValueError("need at least one die with at least two faces")
    grids = np.meshgrid(*[np.arange(1, faces + 1)] * n_dice, indexing="ij")
    total = np.sum(np.stack(grids), axis=0)
    return from_draws(total, np.ones_like(total))


def focus_count(n_coins: int, bias: int) -> Exact:
    """Number of coins on the focus face, each ``bias`` times likelier to land on it.

    Each of the ``2 ** n_coins`` sequences has weight ``bias ** (focus faces)``.
    """
    if n_coins < 1 or bias < 1:
        raise ValueError("need at least one coin and a bias >= 1")
    grids = np.meshgrid(*[np.array([0, 1])] * n_coins, indexing="ij")
    count = np.sum(np.stack(grids), axis=0)
    return from_draws(count, bias**count)


def categorical(weights: Sequence[int]) -> Exact:
    """A distribution over indices ``0..k-1`` with the given integer weights."""
    return Exact(tuple(range(len(weights))), tuple(int(w) for w in weights))


def mixture(shares: Sequence[int], tables: Sequence[Sequence[int]]) -> Exact:
    """Marginal over categories of a mixture of subgroups.

    ``shares[g]`` is subgroup ``g``'s integer share and ``tables[g][c]`` the integer
    prevalence of category ``c`` within it; the marginal weight of ``c`` is
    ``sum_g shares[g] * tables[g][c] / sum_c' tables[g][c']``, scaled to integers.
    """
    if len(shares) != len(tables) or not tables:
        raise ValueError("need one prevalence table per subgroup")
    k = len(tables[0])
    if any(len(t) != k for t in tables):
        raise ValueError("all prevalence tables need the same categories")
    probs = [
        sum(
            Fraction(s, sum(shares)) * Fraction(t[c], sum(t))
            for s, t in zip(shares, tables, strict=True)
        )
        for c in range(k)
    ]
    denom = int(np.lcm.reduce([p.denominator for p in probs]))
    return categorical([int(p * denom) for p in probs])


def shift(dist: Exact, offset: int) -> Exact:
    """The distribution of ``offset + X`` (a previous result added to a new one)."""
    return Exact(tuple(v + offset for v in dist.values), dist.weights)


@dataclass(frozen=True)
class Observation:
    """A statement about a result: ``even``, ``odd``, or smaller/greater/not equal to ``value``."""

    kind: ObservationKind
    value: int = 0

    def holds(self, x: int) -> bool:
        """Whether result ``x`` is consistent with the observation."""
        tests: dict[ObservationKind, Callable[[int], bool]] = {
            "even": lambda v: v % 2 == 0,
            "odd": lambda v: v % 2 == 1,
            "smaller": lambda v: v < self.value,
            "greater": lambda v: v > self.value,
            "not-equal": lambda v: v != self.value,
        }
        return tests[self.kind](x)

    @property
    def text(self) -> str:
        """The observation in words, e.g. ``greater than 7``."""
        words: dict[ObservationKind, str] = {
            "even": "even",
            "odd": "odd",
            "smaller": f"smaller than {self.value}",
            "greater": f"greater than {self.value}",
            "not-equal": f"not equal to {self.value}",
        }
        return words[self.kind]


def condition(dist: Exact, observations: Sequence[Observation]) -> Exact:
    """``dist`` conditioned on all ``observations``: inconsistent outcomes get weight 0.

    Raises ``ValueError`` if no outcome is consistent with them.
    """
    weights = tuple(
        w if all(o.holds(v) for o in observations) else 0
        for v, w in zip(dist.values, dist.weights, strict=True)
    )
    if sum(weights) == 0:
        raise ValueError(f"no outcome is consistent with {[o.text for o in observations]}")
    return Exact(dist.values, weights)
