"""Stage-boundary types of environments: messages, queries, probes, turns, episodes.

An environment emits :class:`Episode` objects. Each :class:`Turn` carries the
observation revealed at that turn, the conversation delivered so far under each
delivery, and its :class:`Probe` objects. A probe is one belief question with its
outcome labels, its exact oracle (or ``None``) and one :class:`Query` per
Latin-square rotation. Everything here is plain text: no tokenizer is involved
until :mod:`belieflens.readouts.render`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import Field, dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from belieflens.types import Delivery, PromptFormat, Role, SpanRole


@dataclass(frozen=True)
class Span:
    """Where one part of a message's text sits: characters ``start:end`` of its content.

    Examples:
        >>> Span(8, 13, "evidence", 2)
        Span(start=8, end=13, role='evidence', turn=2)
    """

    start: int
    end: int
    role: SpanRole
    turn: int = 0
    """The turn whose evidence it is (``evidence``); 0 otherwise."""


@dataclass(frozen=True)
class Marked:
    """A piece of text with its role, for :func:`marked`."""

    text: str
    role: SpanRole
    turn: int = 0


def marked(*pieces: str | Marked) -> tuple[str, tuple[Span, ...]]:
    """Text joined from ``pieces`` and the spans of its :class:`Marked` pieces (plain strings
    are template).

    Examples:
        >>> marked("Result: ", Marked("heads", "evidence", 1), ".")
        ('Result: heads.', (Span(start=8, end=13, role='evidence', turn=1),))
    """
    text, spans = "", []
    for piece in pieces:
        if isinstance(piece, Marked):
            if piece.text:
                spans.append(Span(len(text), len(text) + len(piece.text), piece.role,
                                  piece.turn))
            text += piece.text
        else:
            text += piece
    return text, tuple(spans)


@dataclass(frozen=True)
class Message:
    """One chat message; ``spans`` say where its evidence and its question sit in
    ``content`` (the rest is template), so that read-outs of different episodes can be
    aligned by role (:mod:`belieflens.readouts.render`)."""

    role: Role
    content: str
    spans: tuple[Span, ...] = ()

    @classmethod
    def of(cls, role: Role, *pieces: str | Marked) -> Message:
        """A message whose content is ``pieces`` joined (:func:`marked`)."""
        text, spans = marked(*pieces)
        return cls(role, text, spans)


@dataclass(frozen=True)
class Query:
    """One read-out: a context and the option continuations in position order.

    Attributes:
        messages: the conversation (ignored for ``format="raw"`` and ``"tokens"``).
        prefill: text the assistant turn starts with (``chat``), the whole raw
            prompt (``raw``), or the space-separated vocabulary words fed as ids after
            the BOS (``tokens``); the options continue it.
        options: continuation text of each option, in position order.
        outcome: outcome index shown at each position (one row of a Latin square).
        rotation: which rotation this is.
        format: ``chat`` applies the model's chat template, ``raw`` does not, ``tokens``
            renders no text: each word is one vocabulary id.
        terminator: appended to every option when one option is a string prefix
            of another (e.g. "1" and "12"), so each continuation ends unambiguously.
    """

    messages: tuple[Message, ...]
    prefill: str
    options: tuple[str, ...]
    outcome: tuple[int, ...]
    rotation: int = 0
    format: PromptFormat = "chat"
    terminator: str = "\n"

    def __post_init__(self) -> None:
        if len(self.options) != len(self.outcome):
            raise ValueError("a query needs one outcome index per option")
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"options must be distinct, got {self.options!r}")


@dataclass(frozen=True)
class Probe:
    """A belief question asked at one turn under one delivery.

    Attributes:
        name: the probe's name, e.g. ``next-flip``.
        labels: outcome labels, indexed by outcome.
        oracle: exact Bayesian distribution over outcomes, or ``None``.
        queries: one read-out per rotation.
        delivery: the delivery whose conversation the queries extend.
        kind: how the read-out is taken (``mcq`` letters, ``completion`` text, or
            ``next-token``: the next symbol of a token-level process).
        state: the exact belief over the hidden states of a token-level process at this
            read-out (stored as ``belief_state``), or ``None``.
        state_labels: the label of each entry of ``state``.
    """

    name: str
    labels: tuple[str, ...]
    oracle: tuple[float, ...] | None
    queries: tuple[Query, ...]
    delivery: Delivery
    kind: str = "mcq"
    state: tuple[float, ...] | None = None
    state_labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        k = len(self.labels)
        if self.state is not None and len(self.state) != len(self.state_labels):
            raise ValueError(f"probe {self.name}: state and state_labels differ in length")
        if self.oracle is not None and len(self.oracle) != k:
            raise ValueError(
                f"probe {self.name}: oracle has {len(self.oracle)} entries for {k} labels"
            )
        for q in self.queries:
            if any(o < 0 or o >= k for o in q.outcome):
                raise ValueError(f"probe {self.name}: outcome index out of range")


@dataclass(frozen=True)
class Turn:
    """One turn of an episode: the evidence so far and the probes read after it.

    ``index`` 0 is the read-out before any evidence (the prior).
    """

    index: int
    observation: str
    messages: Mapping[Delivery, tuple[Message, ...]]
    probes: tuple[Probe, ...]


@dataclass(frozen=True)
class Episode:
    """A sequence of turns generated from one draw of the environment's latent state."""

    index: int
    turns: tuple[Turn, ...]
    truth: Mapping[str, float | str] = field(default_factory=dict)


class ParamsLike(Protocol):
    """A parameter dataclass instance (what :func:`dataclasses.asdict` accepts)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]


@runtime_checkable
class Environment(Protocol):
    """A generative process that emits episodes, deterministic in ``seed``."""

    @property
    def name(self) -> str:
        """The environment's kebab-case registry name."""
        ...

    @property
    def params(self) -> ParamsLike:
        """The validated, frozen parameter dataclass the environment was built with."""
        ...

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes; the same ``seed`` yields the same episodes."""
        ...


ParamsT = TypeVar("ParamsT")


class Configured(Generic[ParamsT]):
    """An environment built from a validated, frozen parameter record, kept as ``params``
    (its ``__init__`` sets ``self._params``)."""

    _params: ParamsT

    @property
    def params(self) -> ParamsT:
        """The validated parameters."""
        return self._params


def append_user(context: tuple[Message, ...], text: str, role: SpanRole | None = None
                ) -> tuple[Message, ...]:
    """Append ``text`` as the user's words: merged into a trailing user message (its spans
    kept), else a new one; ``role`` marks the appended text (e.g. ``question``)."""
    if context and context[-1].role == "user":
        last = context[-1]
        start = len(last.content) + 2
        mark = (Span(start, start + len(text), role),) if role and text else ()
        return (*context[:-1], Message("user", f"{last.content}\n\n{text}",
                                       last.spans + mark))
    mark = (Span(0, len(text), role),) if role and text else ()
    return (*context, Message("user", text, mark))
