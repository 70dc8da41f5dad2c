"""Shared machinery of the revealed-belief environments: grid points to episodes.

An environment lists its grid as :class:`GridPoint` objects in a fixed order.
:class:`GridEnvironment` turns grid point ``g`` into one episode with one turn
(index 0) holding two probes:

- ``revealed`` (``completion``): ``raw`` format (default) puts the scenario and
  the completion stem in one plain-text prompt; ``chat`` puts the scenario in a
  user turn and the stem in the assistant prefill. Each outcome continues the
  stem as ``" " + label``; where one outcome is a prefix of another (``1`` and
  ``12``) the renderer appends :data:`TERMINATOR` to every outcome.
- ``stated`` (``mcq``): see :mod:`belieflens.envs.revealed.stated`. It asks for
  the probability of the **target** outcome: the most likely one (the first in
  outcome order among ties).

``episodes(n, seed)`` yields grid points ``0..n-1`` in grid order, or, with
``sample=true``, the first ``n`` of a permutation drawn from ``seed``; never more
than the grid holds. Distractors of grid point ``g`` are drawn from
``np.random.default_rng([seed, g])``, so a grid point reads the same whichever
episodes are drawn with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import ClassVar, Generic, Literal, TypeVar, get_args

import numpy as np

from belieflens.envs.base import Episode, Message, Turn
from belieflens.envs.params import bad, param
from belieflens.envs.questions import completion_probe
from belieflens.envs.revealed.stated import candidates, stated_probe
from belieflens.types import Delivery, PromptFormat, SectionName

TERMINATOR = "."
"""Appended to every outcome continuation when outcomes are prefix-ambiguous (``1``/``12``)."""

DELIVERY: Delivery = "single-turn"
"""The only delivery: each scenario is one message."""


@dataclass(frozen=True)
class GridPoint:
    """One scenario of a grid, with its exact outcome distribution.

    Attributes:
        scenario: the setup text (what is known before the outcome).
        stem: the sentence start the outcome completes, e.g. ``The sum is``.
        question: the stated question, with ``{outcome}`` where the target's label goes.
        labels: outcome labels in outcome order.
        probs: exact probability of each outcome.
        observation: what the scenario reveals beyond the setup ("" if nothing).
        truth: the grid point's variables (str or float) for the episode's truth.
    """

    scenario: str
    stem: str
    question: str
    labels: tuple[str, ...]
    probs: tuple[Fraction, ...]
    observation: str
    truth: Mapping[str, float | str]

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.probs) or len(self.labels) < 2:
            raise ValueError("a grid point needs two or more outcomes, one probability each")
        if sum(self.probs) != 1:
            raise ValueError("outcome probabilities must sum to 1")
        if "{outcome}" not in self.question:
            raise ValueError("the stated question needs an {outcome} placeholder")

    @property
    def target(self) -> int:
        """Index of the outcome the stated question asks about (most likely; first among ties)."""
        return self.probs.index(max(self.probs))

    @property
    def mode(self) -> str:
        """Label of the unique most likely outcome, or "" when the maximum is shared."""
        best = max(self.probs)
        return self.labels[self.target] if self.probs.count(best) == 1 else ""


@dataclass(frozen=True)
class RevealedParams:
    """Parameters shared by every revealed-belief environment."""

    format: Literal["raw", "chat"] = param(
        "raw", "raw: plain-text completion; chat: scenario as a user turn, stem as the prefill"
    )
    sample: bool = param(False, "episodes are a seeded sample of the grid instead of grid order")

    def __post_init__(self) -> None:
        if self.format not in get_args(PromptFormat):
            raise bad("format", self.format, "raw or chat")


P = TypeVar("P", bound=RevealedParams)


def episode(point: GridPoint, index: int, grid_index: int, fmt: PromptFormat,
            rng: np.random.Generator) -> Episode:
    """The one-turn episode of ``point``: probes ``revealed`` and ``stated``.

    Truth: the point's variables plus ``grid_index``, ``target`` (label asked
    about), ``mode`` (unique mode's label or ""), ``stated_p`` (the target's exact
    probability), ``stated_answer`` and ``stated_correct`` (the correct
    candidate's label and outcome index in the stated probe).
    """
    context = (Message("user", point.scenario),)
    stem = point.stem if fmt == "chat" else f"{point.scenario} {point.stem}"
    revealed = completion_probe(
        "revealed", context, stem, point.labels, [float(p) for p in point.probs], DELIVERY,
        format=fmt, continuations=[f" {label}" for label in point.labels], terminator=TERMINATOR,
    )
    target = point.target
    cands = candidates(point.probs[target], rng)
    question = point.question.replace("{outcome}", point.labels[target])
    stated = stated_probe(point.scenario, question, cands, fmt, DELIVERY)
    truth: dict[str, float | str] = {
        **point.truth,
        "grid_index": float(grid_index),
        "target": point.labels[target],
        "mode": point.mode,
        "stated_p": float(point.probs[target]),
        "stated_answer": cands.labels[cands.correct],
        "stated_correct": float(cands.correct),
    }
    turn = Turn(index=0, observation=point.observation, messages={DELIVERY: context},
                probes=(revealed, stated))
    return Episode(index=index, turns=(turn,), truth=truth)


class GridEnvironment(Generic[P]):
    """Base of the grid environments: subclasses set ``name``, ``Params`` and :meth:`grid`."""

    name: str
    sections: ClassVar[tuple[SectionName, ...]] = ("revealed",)
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: P) -> None:
        self._params = params

    @property
    def params(self) -> P:
        """The validated parameters."""
        return self._params

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point, in the environment's documented order."""
        raise NotImplementedError

    @cached_property
    def points(self) -> tuple[GridPoint, ...]:
        """The grid, built once."""
        return tuple(self.grid())

    def count(self) -> int:
        """How many prompts (grid points, one episode each) the grid yields."""
        return len(self.points)

    def order(self, seed: int) -> np.ndarray:
        """Grid indices in episode order: grid order, or a permutation from ``seed``."""
        if self._params.sample:
            return np.random.default_rng(seed).permutation(self.count())
        return np.arange(self.count())

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``min(n, count())`` one-turn episodes (order: module docstring)."""
        for i, g in enumerate(self.order(seed)[: max(n, 0)]):
            rng = np.random.default_rng([seed, int(g)])
            yield episode(self.points[int(g)], i, int(g), self._params.format, rng)
