"""The coin flip's statistic baselines: features of what the prompt has shown so far from which
the posterior could be read without any model (the environment's
:class:`~belieflens.episodes.capabilities.StatisticFeatures`).

Per turn of an episode, from the reports each turn's observation shows (turn 0: none):

- ``counts``: first faces and reports so far, ``(h, n)``: the sufficient statistic of the
  original coin flip;
- ``turn``: one-hot of the turn;
- ``last k flips`` (``k`` of :data:`~belieflens.episodes.statistics.LAST`): one-hots of the
  last ``k`` reported faces (first, second, none yet) beside the turn's one-hot;

and what each variant's oracle also conditions on:

- ``prior and counts`` (``prior=stated``): the stated prior's pseudo-counts with the counts,
  ``(a0, b0, h, n)``;
- ``evidence`` (``reports=noisy``): the reports' summed log-odds, each report
  ``±log(ρ / (1 − ρ))`` by its stated reliability ρ, with the counts;
- ``recent counts`` (``changepoint``): the counts of the last 2, 4 and 8 reports.

Faces are read back from each report's last word (the episode's own face names,
``truth["first_face"]`` under ``sides=random``), reliabilities from "(right R% of the time)":
the text the model was shown, so a report is counted as it was reported.

Examples:
    >>> env = belieflens.envs.get("coin-flip", turns=3)
    >>> f = features(next(env.episodes(1, seed=0)), env.params)
    >>> list(f), f["counts"].shape, f["last 2 flips"].shape
    (['counts', 'turn', 'last 1 flip', 'last 2 flips', 'last 4 flips'], (4, 2), (4, 10))
"""

from __future__ import annotations

import re
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from belieflens.episodes.base import Episode
from belieflens.episodes.statistics import counts, recency


class VariantParams(Protocol):
    """The coin-flip parameters the features read (``CoinFlipParams`` has them)."""

    @property
    def reports(self) -> str:
        ...

    @property
    def prior(self) -> str:
        ...

    @property
    def changepoint(self) -> float:
        ...


F64 = NDArray[np.float64]

NOUN = ("flip", "flips")
WINDOWS: tuple[int, ...] = (2, 4, 8)
"""The windows of ``recent counts``."""
_RELIABILITY = re.compile(r"\(right (\d+(?:\.\d+)?)% of the time\)")


def reported(episode: Episode, separator: str = ", "
             ) -> tuple[list[list[int]], list[list[float]]]:
    """Per turn, the faces reported (0: the first face) and each report's reliability (1 for
    a flip told directly); a word that is neither face's name is one line
    (:class:`ValueError`)."""
    faces = (str(episode.truth.get("first_face", "heads")),
             str(episode.truth.get("second_face", "tails")))
    out: list[list[int]] = []
    rel: list[list[float]] = []
    for turn in episode.turns:
        parts = [p.strip() for p in turn.observation.split(separator) if p.strip()]
        words = [p.split()[-1] for p in parts]
        unknown = [w for w in words if w not in faces]
        if unknown:
            raise ValueError(f"episode {episode.index} turn {turn.index} reports "
                             f"{unknown[0]!r}, not one of the faces {list(faces)}")
        out.append([faces.index(w) for w in words])
        found = [_RELIABILITY.search(p) for p in parts]
        rel.append([float(m[1]) / 100 if m else 1.0 for m in found])
    return out, rel


def _cumulative(rows: list[float]) -> F64:
    return np.cumsum(rows)[:, None].astype(np.float64)


def features(episode: Episode, params: VariantParams) -> dict[str, F64]:
    """The coin flip's statistic features of ``episode`` by name (module docstring), each
    ``[turn, feature]``; ``params`` say which variants' features apply."""
    noisy = params.reports == "noisy"
    faces, rel = reported(episode, "; " if noisy else ", ")
    base = counts(faces, 0)
    out = {"counts": base, **recency(faces, 2, NOUN)}
    if params.prior == "stated":
        prior = [float(episode.truth["a0"]), float(episode.truth["b0"])]
        out["prior and counts"] = np.concatenate(
            [np.tile(prior, (len(faces), 1)), base], axis=1)
    if noisy:
        odds = [sum((1 if f == 0 else -1) * np.log(r / max(1 - r, 1e-9))
                    for f, r in zip(fs, rs, strict=True))
                for fs, rs in zip(faces, rel, strict=True)]
        out["evidence"] = np.concatenate([_cumulative(odds), base], axis=1)
    if params.changepoint > 0:
        flat = [f for fs in faces for f in fs]
        seen = np.cumsum([len(fs) for fs in faces])
        out["recent counts"] = np.array(
            [[sum(1 for f in flat[max(0, n - w):n] if f == 0) for w in WINDOWS] + [n]
             for n in seen], dtype=np.float64)
    return out
