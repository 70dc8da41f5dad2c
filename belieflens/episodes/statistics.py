"""Building blocks of an environment's statistic features
(:class:`~belieflens.episodes.capabilities.StatisticFeatures`): per turn of one episode, from
the outcomes each turn revealed (turn 0 reveals none).

``revealed[t]`` lists the outcomes (symbol indices ``0 .. n_symbols - 1``) shown at turn ``t``;
every function returns one row per turn. Each feature set is a plain array, so any
environment that can say what each turn revealed gets the same baselines.

Examples:
    >>> revealed = [[], [0], [1], [0]]          # heads, tails, heads
    >>> counts(revealed, 0).tolist()            # (heads so far, flips so far)
    [[0.0, 0.0], [1.0, 1.0], [1.0, 2.0], [2.0, 3.0]]
    >>> last_k(revealed, 1, 2)[:, :3].tolist()  # the last flip: heads, tails, none yet
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]

LAST: tuple[int, ...] = (1, 2, 4)
"""The ``k`` of the last-``k`` feature sets by default."""


def turn_one_hot(n_turns: int) -> F64:
    """``[turn, turn]``: one column per turn."""
    return np.eye(n_turns)


def counts(revealed: Sequence[Sequence[int]], symbol: int) -> F64:
    """``[turn, 2]``: how often ``symbol`` was revealed so far, and how many outcomes were."""
    hits = np.cumsum([sum(1 for o in turn if o == symbol) for turn in revealed])
    seen = np.cumsum([len(turn) for turn in revealed])
    return np.stack([hits, seen], axis=1).astype(np.float64)


def last_k(revealed: Sequence[Sequence[int]], k: int, n_symbols: int) -> F64:
    """``[turn, k * (n_symbols + 1)]``: one-hots of the last ``k`` outcomes revealed so far
    (oldest first), each over the symbols and a last column for *none yet*."""
    out = np.zeros((len(revealed), k, n_symbols + 1))
    history: list[int] = []
    for t, turn in enumerate(revealed):
        history.extend(turn)
        recent = history[-k:]
        pad = [n_symbols] * (k - len(recent))
        for j, o in enumerate([*pad, *recent]):
            out[t, j, o] = 1.0
    return out.reshape(len(revealed), -1)


def recency(revealed: Sequence[Sequence[int]], n_symbols: int, noun: tuple[str, str], *,
            lasts: Sequence[int] = LAST) -> dict[str, F64]:
    """The feature sets every process with a turn order has: ``turn`` (one-hot) and, for each
    ``k`` of ``lasts``, ``last k NOUNS``: the last ``k`` outcomes' one-hots beside the turn's.
    ``noun`` is the outcome's name, singular and plural (``("flip", "flips")``)."""
    turn = turn_one_hot(len(revealed))
    out = {"turn": turn}
    for k in lasts:
        out[f"last {k} {noun[0] if k == 1 else noun[1]}"] = np.concatenate(
            [last_k(revealed, k, n_symbols), turn], axis=1)
    return out
