"""The coin flip's statistic baselines: features of the flips shown so far from which the
posterior could be read without any model (the environment's
:class:`~belieflens.episodes.capabilities.StatisticFeatures`).

Per turn of an episode, from the flips each turn's observation reports (turn 0: none):

- ``counts``: heads and flips so far, ``(h, n)``: the posterior's sufficient statistic;
- ``turn``: one-hot of the turn;
- ``last k flips`` (``k`` of :data:`~belieflens.episodes.statistics.LAST`): one-hots of the
  last ``k`` flips (heads, tails, none yet) beside the turn's one-hot.

The flips are read back from each turn's ``observation`` (the sides' names joined by
``", "``), the text the model was shown, so a report is counted as it was reported.

Examples:
    >>> env = belieflens.envs.get("coin-flip", turns=3)
    >>> f = features(next(env.episodes(1, seed=0)))
    >>> list(f), f["counts"].shape, f["last 2 flips"].shape
    (['counts', 'turn', 'last 1 flip', 'last 2 flips', 'last 4 flips'], (4, 2), (4, 10))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from belieflens.episodes.base import Episode
from belieflens.episodes.statistics import counts, recency

F64 = NDArray[np.float64]

SIDES: tuple[str, str] = ("heads", "tails")
"""The sides' names as observations report them; the first is the side counted (heads)."""

NOUN = ("flip", "flips")


def reported(episode: Episode, sides: Sequence[str] = SIDES) -> list[list[int]]:
    """The flips each turn reports, as indices into ``sides`` (0: the first side); a word that
    is no side's name is one line (:class:`ValueError`)."""
    out: list[list[int]] = []
    for turn in episode.turns:
        words = [w.strip() for w in turn.observation.split(",") if w.strip()]
        unknown = [w for w in words if w not in sides]
        if unknown:
            raise ValueError(f"episode {episode.index} turn {turn.index} reports "
                             f"{unknown[0]!r}, not one of the sides {list(sides)}")
        out.append([list(sides).index(w) for w in words])
    return out


def features(episode: Episode, sides: Sequence[str] = SIDES) -> dict[str, F64]:
    """The coin flip's statistic features of ``episode`` by name (module docstring), each
    ``[turn, feature]``."""
    flips = reported(episode, sides)
    return {"counts": counts(flips, 0), **recency(flips, len(sides), NOUN)}
