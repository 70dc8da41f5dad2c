"""Shared machinery of the revealed-belief environments: grid points to episodes.

An environment lists its grid as :class:`GridPoint` objects in a fixed order.
Each grid point is one scenario with an exact outcome distribution, read out in
two ways:

- ``revealed`` (``completion``): ``raw`` format (default) puts the scenario and
  the completion stem in one plain-text prompt; ``chat`` puts the scenario in a
  user turn (after a system message where the point has one) and the stem in the
  assistant prefill. Each outcome continues the stem as ``" " + label``; where one
  outcome is a prefix of another (``1`` and ``12``) the renderer appends
  :data:`TERMINATOR` to every outcome.
- ``stated`` (``mcq``): a question about the probability of one outcome, with
  five candidates (see :mod:`belieflens.envs.revealed.stated`). In the ``paper``
  style it is always asked through the chat template, as the paper asks its MCQs
  (Sec. 3.3); ``format`` then applies to the revealed probe only.

Which outcomes get a stated question is the ``stated`` parameter (:data:`StatedSet`):

- ``every`` (default, the paper's unit of count): every outcome of positive
  probability, the most likely first;
- ``mode``: the most likely outcome; where several share the maximum (a tie),
  **each** of them gets its own question and the episode truth says how many tie;
- ``first``: the first outcome in outcome order (what each of the paper's App. C
  examples asks: face 1, 0 Heads, Left, A).

A grid point and one asked outcome form an **item**; items are the episodes.
Item ``(g, 0)`` asks about the grid point's first asked outcome (its mode, the
first among ties, under ``every`` and ``mode``) and also carries the ``revealed``
probe, so RevB (the revealed argmax vs the unique mode) and StaA (about that mode)
pair on one episode; items ``(g, q > 0)`` hold only a stated probe. ``count()`` is
the number of items; :meth:`GridEnvironment.prompt_counts` also gives the number of
revealed-belief prompts (grid points).

``episodes(n, seed)`` yields items ``0..n-1`` in item order (grid order, then
asked outcome), or, with ``sample=true``, the first ``n`` of a permutation drawn
from ``seed``; never more than the grid holds. The ``belieflens`` style's seeded
distractors of item ``(g, q)`` come from ``np.random.default_rng([seed, g])`` for
``q = 0`` and ``[seed, g, q]`` otherwise, so an item reads the same whichever
episodes are drawn with it.

``style`` selects the wording: ``paper`` (default) writes every prompt as App. C
of the paper does and its stated candidates as fractions (``1/12``);
``belieflens`` keeps this toolkit's earlier wording with percentage candidates.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import ClassVar, Literal, TypeVar, get_args

import numpy as np

from belieflens.envs.revealed.report import revealed_section
from belieflens.envs.revealed.stated import (
    candidates,
    case_candidates,
    evidence_spans,
    paper_candidates,
    paper_stated_probe,
    stated_probe,
)
from belieflens.episodes.base import Configured, Episode, Message, Probe, Turn
from belieflens.episodes.params import bad, param
from belieflens.episodes.questions import completion_probe
from belieflens.report.section import SectionFn
from belieflens.types import Delivery, PromptFormat

TERMINATOR = "."
"""Appended to every outcome continuation when outcomes are prefix-ambiguous (``1``/``12``)."""

DELIVERY: Delivery = "single-turn"
"""The only delivery: each scenario is one message."""

StatedSet = Literal["every", "mode", "first"]
"""Which outcomes of a grid point get a stated question (module docstring)."""

Style = Literal["paper", "belieflens"]
"""Prompt wording: the paper's App. C, or this toolkit's earlier wording."""

CASE_OFFSETS = (Fraction(94, 5000), Fraction(-181, 5000))
"""The case study's two near-miss candidates, as offsets from the correct value (the paper's
question shows 1647/5000 and 1372/5000 beside the correct 1553/5000)."""


@dataclass(frozen=True)
class GridPoint:
    """One scenario of a grid, with its exact outcome distribution.

    Attributes:
        scenario: the setup text (what is known before the outcome).
        stem: the sentence start the outcome completes, e.g. ``The sum is``.
        question: the stated question, with ``{outcome}`` where the asked label goes.
        labels: outcome labels in outcome order.
        probs: exact probability of each outcome.
        observation: what the scenario reveals beyond the setup ("" if nothing).
        truth: the grid point's variables (str or float) for the episode's truth.
        style: the wording the point was written in (selects the stated format).
        system: a system message before the scenario (the case study), or ``None``.
        group_rates: per outcome, its rate in the two subgroups (the case study's
            stated candidates), or ``None`` for the paper's ``p * k / 3`` rule.
        stated_probs: the probability each stated question asks about, where it is
            not the outcome's share of ``probs`` (the case study's conditions are not
            mutually exclusive: each one's marginal prevalence), else ``None``.
        evidence: the pieces of ``scenario`` that are evidence (the options shown, a previous
            result, an observation), marked in every message that holds them as the
            evidence of turns 1, 2, ... (:func:`~.stated.evidence_spans`).
    """

    scenario: str
    stem: str
    question: str
    labels: tuple[str, ...]
    probs: tuple[Fraction, ...]
    observation: str
    truth: Mapping[str, float | str]
    style: Style = "belieflens"
    system: str | None = None
    group_rates: tuple[tuple[Fraction, Fraction], ...] | None = None
    stated_probs: tuple[Fraction, ...] | None = None
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.probs) or not self.labels:
            raise ValueError("a grid point needs one or more outcomes, one probability each")
        if sum(self.probs) != 1:
            raise ValueError("outcome probabilities must sum to 1")
        if "{outcome}" not in self.question:
            raise ValueError("the stated question needs an {outcome} placeholder")
        for extra in (self.group_rates, self.stated_probs):
            if extra is not None and len(extra) != len(self.labels):
                raise ValueError("group_rates and stated_probs need one entry per outcome")
        if any(not piece or piece not in self.scenario for piece in self.evidence):
            raise ValueError("every piece of evidence must be a piece of the scenario")

    def message(self) -> Message:
        """The scenario as the user's turn, its evidence marked."""
        return Message("user", self.scenario, evidence_spans(self.scenario, self.evidence))

    @property
    def target(self) -> int:
        """Index of the most likely outcome (the first in outcome order among ties)."""
        return self.probs.index(max(self.probs))

    @property
    def ties(self) -> int:
        """How many outcomes share the maximum probability (1: a unique mode)."""
        return self.probs.count(max(self.probs))

    @property
    def mode(self) -> str:
        """Label of the unique most likely outcome, or "" when the maximum is shared."""
        return self.labels[self.target] if self.ties == 1 else ""

    def asked(self, which: StatedSet) -> tuple[int, ...]:
        """Outcome indices that get a stated question, in item order (module docstring)."""
        best = max(self.probs)
        modes = tuple(i for i, p in enumerate(self.probs) if p == best)
        if which == "first":
            return (next(i for i, p in enumerate(self.probs) if p > 0),)
        if which == "mode":
            return modes
        return (modes[0], *(i for i, p in enumerate(self.probs) if p > 0 and i != modes[0]))

    def stated_p(self, outcome: int) -> Fraction:
        """The exact probability the stated question about ``outcome`` asks for."""
        return (self.probs if self.stated_probs is None else self.stated_probs)[outcome]


@dataclass(frozen=True)
class PromptCounts:
    """How many prompts a grid yields.

    Attributes:
        revealed: revealed-belief prompts (grid points, one scenario each).
        stated: stated-answer questions (items: a grid point and one asked outcome);
            also the number of episodes.
    """

    revealed: int
    stated: int

    def text(self) -> str:
        """One line for ``belieflens envs``."""
        return (f"grid: {self.revealed} revealed-belief prompts, {self.stated} stated-answer "
                f"questions ({self.stated} episodes) with the defaults")


@dataclass(frozen=True)
class RevealedParams:
    """Parameters shared by every revealed-belief environment."""

    format: Literal["raw", "chat"] = param(
        "raw", "revealed read-out: raw: plain-text completion; chat: scenario as a user turn, "
        "stem as the prefill (style=paper asks the stated questions through the chat template)"
    )
    sample: bool = param(False, "episodes are a seeded sample of the grid instead of grid order")
    style: Literal["paper", "belieflens"] = param(
        "paper", "paper: App. C wording, fraction candidates; belieflens: earlier wording, percents"
    )
    stated: Literal["every", "mode", "first"] = param(
        "every", "stated questions about every possible outcome, the mode(s) (each tied mode), "
        "or the first outcome"
    )
    one_of: ClassVar[Mapping[str, Sequence[int]]] = {}
    """A grid's integer fields limited to the values listed (``None`` stands for all)."""

    def __post_init__(self) -> None:
        if self.format not in get_args(PromptFormat):
            raise bad("format", self.format, "raw or chat")
        if self.style not in get_args(Style):
            raise bad("style", self.style, "paper or belieflens")
        if self.stated not in get_args(StatedSet):
            raise bad("stated", self.stated, "every, mode or first")
        for name, allowed in self.one_of.items():
            self._check_one_of(name, allowed)

    def _check_one_of(self, name: str, allowed: Sequence[int]) -> None:
        """Refuse field ``name`` set to a value outside ``allowed`` (``None`` stands for all)."""
        value = getattr(self, name)
        if value is not None and value not in allowed:
            raise bad(name, value, ", ".join(str(a) for a in allowed) + " or none")


P = TypeVar("P", bound=RevealedParams)


def _revealed(point: GridPoint, fmt: PromptFormat) -> Probe:
    context: tuple[Message, ...] = (point.message(),)
    if point.system is not None:
        context = (Message("system", point.system), *context)
        raw = f"{point.system}\nUser: {point.scenario}\nAssistant: {point.stem}"
    else:
        raw = f"{point.scenario} {point.stem}"
    return completion_probe(
        "revealed", context, point.stem if fmt == "chat" else raw, point.labels,
        [float(p) for p in point.probs], DELIVERY, format=fmt,
        continuations=[f" {label}" for label in point.labels], terminator=TERMINATOR,
    )


def _stated(point: GridPoint, outcome: int, fmt: PromptFormat,
            rng: np.random.Generator) -> tuple[Probe, str, int]:
    """The stated probe about ``outcome``, the correct candidate's label and index."""
    question = point.question.replace("{outcome}", point.labels[outcome])
    p = point.stated_p(outcome)
    if point.style == "belieflens":
        cands = candidates(p, rng)
        probe = stated_probe(point.scenario, question, cands, fmt, DELIVERY,
                             evidence=point.evidence)
        return probe, cands.labels[cands.correct], cands.correct
    # the paper asks its MCQs through the chat template (Sec. 3.3), whatever the RevB format
    if point.group_rates is not None:
        fc = case_candidates(p, point.group_rates[outcome], CASE_OFFSETS)
        probe = paper_stated_probe(point.scenario, question, fc, "chat", DELIVERY,
                                   system=point.system, evidence=point.evidence)
    else:
        fc = paper_candidates(p)
        probe = paper_stated_probe(point.scenario, question, fc, "chat", DELIVERY,
                                   evidence=point.evidence)
    return probe, fc.labels[fc.correct], fc.correct


def item_episode(point: GridPoint, index: int, grid_index: int, asked: Sequence[int], q: int,
                 fmt: PromptFormat, rng: np.random.Generator) -> Episode:
    """Item ``q`` of ``point`` as a one-turn episode (probes: module docstring).

    Truth: the point's variables plus ``grid_index``, ``asked_index`` (``q``),
    ``target`` (the asked outcome's label), ``mode`` (unique mode's label or ""),
    ``ties`` (outcomes sharing the maximum), ``stated_p`` (the asked probability),
    ``stated_answer`` and ``stated_correct`` (the correct candidate's label and
    outcome index in the stated probe) and ``has_revealed`` (1 on item 0).
    """
    outcome = asked[q]
    stated, answer, correct = _stated(point, outcome, fmt, rng)
    probes = (_revealed(point, fmt), stated) if q == 0 else (stated,)
    truth: dict[str, float | str] = {
        **point.truth,
        "grid_index": float(grid_index),
        "asked_index": float(q),
        "target": point.labels[outcome],
        "mode": point.mode,
        "ties": float(point.ties),
        "stated_p": float(point.stated_p(outcome)),
        "stated_answer": answer,
        "stated_correct": float(correct),
        "has_revealed": float(q == 0),
    }
    context = (point.message(),)
    turn = Turn(index=0, observation=point.observation, messages={DELIVERY: context},
                probes=probes)
    return Episode(index=index, turns=(turn,), truth=truth)


class GridEnvironment(Configured[P]):
    """Base of the grid environments: subclasses set ``name``, ``Params`` and :meth:`grid`."""

    name: str
    sections: ClassVar[tuple[SectionFn, ...]] = (revealed_section,)
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: P) -> None:
        self._params = params

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point, in the environment's documented order."""
        raise NotImplementedError

    @cached_property
    def points(self) -> tuple[GridPoint, ...]:
        """The grid, built once."""
        return tuple(self.grid())

    @cached_property
    def items(self) -> tuple[tuple[int, int], ...]:
        """Every item ``(grid index, asked index)`` in item order."""
        which = self._params.stated
        return tuple((g, q) for g, p in enumerate(self.points) for q in range(len(p.asked(which))))

    def count(self) -> int:
        """How many episodes (items: a grid point and one stated question) the grid yields."""
        return len(self.items)

    def prompt_counts(self) -> PromptCounts:
        """Revealed-belief prompts (grid points) and stated questions (items)."""
        return PromptCounts(revealed=len(self.points), stated=len(self.items))

    def order(self, seed: int) -> np.ndarray:
        """Item indices in episode order: item order, or a permutation from ``seed``."""
        if self._params.sample:
            return np.random.default_rng(seed).permutation(self.count())
        return np.arange(self.count())

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``min(n, count())`` one-turn episodes (order: module docstring)."""
        which = self._params.stated
        for i, k in enumerate(self.order(seed)[: max(n, 0)]):
            g, q = self.items[int(k)]
            rng = np.random.default_rng([seed, g] if q == 0 else [seed, g, q])
            point = self.points[g]
            yield item_episode(point, i, g, point.asked(which), q, self._params.format, rng)
