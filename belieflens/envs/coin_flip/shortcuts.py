"""Shortcut updaters for the coin flip: what a model that did not learn the update would
answer, on the same draws as a study.

Each maps one episode (its environment and draw) and the evidence weight S of a taught model's
target to P(first face next) at every turn (turn 0: before any flip). They calibrate the
teaching gates, which must fail every one (``tests/train/test_gates.py``), and sit beside a
taught model's reading on validation episodes (``python -m bench.teach_curve --shortcuts``):
a model has learned what a shortcut misses only where it is closer to the oracle than the
shortcut.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from belieflens.envs.coin_flip.env import CoinFlip, Draw

Shortcut = Callable[[CoinFlip, Draw, float], list[float]]
"""``(environment, draw, S) -> P(first face next)`` at turns ``0 .. turns``."""


def _counts(env: CoinFlip, draw: Draw) -> tuple[np.ndarray, np.ndarray]:
    """The first face's reported count and the flips told, at every turn."""
    per = env.params.per_turn
    heads = np.cumsum([0, *draw.faces])[:: per]
    return heads.astype(float), np.arange(len(heads), dtype=float) * per


def last_flip(env: CoinFlip, draw: Draw, strength: float) -> list[float]:
    """0.5 ± 0.05 from the last flip told: no accumulation."""
    return [0.5, *(0.55 if f == 1 else 0.45 for f in draw.faces[env.params.per_turn - 1::
                                                                  env.params.per_turn])]


def constant(env: CoinFlip, draw: Draw, strength: float) -> list[float]:
    """One half, whatever is told."""
    return [0.5] * (env.params.turns + 1)


def flat_counts(env: CoinFlip, draw: Draw, strength: float) -> list[float]:
    """A count look-up with the wrong prior: Beta(1, 1) whatever prior the prompt states."""
    h, n = _counts(env, draw)
    return [float(x) for x in (1 + strength * h) / (2 + strength * n)]


def worth_blind(worth: float) -> Shortcut:
    """The prior's mean read, its worth taken as ``worth`` flips whatever the prompt states:
    the counts added to a Beta prior of that mean and worth."""

    def shortcut(env: CoinFlip, draw: Draw, strength: float) -> list[float]:
        mean = draw.a0 / (draw.a0 + draw.b0)
        h, n = _counts(env, draw)
        return [float(x) for x in (mean * worth + strength * h) / (worth + strength * n)]

    shortcut.__name__ = f"worth_blind_{worth:g}"
    shortcut.__doc__ = f"The prior's mean read, its worth taken as {worth:g} flips."
    return shortcut


def exact(env: CoinFlip, draw: Draw, strength: float) -> list[float]:
    """No shortcut: the target itself, the oracle weighting the evidence by ``strength``."""
    return [o[0][0] for o in env.tempered(strength).oracles(draw)]


SHORTCUTS: dict[str, Shortcut] = {
    "last flip alone": last_flip,
    "constant one half": constant,
    "counts, flat prior": flat_counts,
    "counts, stated mean at worth 4": worth_blind(4.0),
}
"""The shortcuts by the label a reading gives them. Worth 4 is the geometric middle of the
worths the shipped adapters were taught (2, 4 and 8 flips)."""
