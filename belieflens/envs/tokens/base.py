"""Stage-boundary types of token-level processes: drawn sequences, mixed states, enumerations.

A token-level process emits sequences of symbol ids (no text, no tokenizer). Position ``t``
of a sequence of length ``L`` is the read-out after ``t`` tokens (``t = 0..L``: turn 0 is
the prior), so per-position oracles have ``L + 1`` rows and the next-token distribution at
turn ``t`` is the distribution of token ``t`` (0-based).

Array dimension names used here: ``episode`` (one sequence), ``turn`` (tokens seen),
``token`` (a position in a sequence), ``state`` (a hidden state, or a bin of the coin's
bias), ``symbol`` (a token id of the process's alphabet), ``row`` (a mixed state or an
enumerated sequence).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import numpy as np
from jaxtyping import Float, Int

from belieflens.episodes.params import bad, int_in
from belieflens.errors import ParameterError

MAX_ROWS = 1 << 22
"""The most sequences or mixed states an exact enumeration may hold (about 4 million)."""


def check_int(name: str, value: object, lo: int, hi: int) -> None:
    """Refuse ``value`` unless it is an int (not a bool) in ``lo..hi``
    (:func:`~belieflens.episodes.params.int_in`'s line)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise bad(name, value, f"an integer in {lo}..{hi}")
    int_in(name, int(value), lo, hi)


def check_float(name: str, value: object, lo: float, hi: float, *, open_lo: bool = False,
                open_hi: bool = False) -> None:
    """Raise :func:`bad` unless ``value`` is a finite real number in the given interval."""
    lb, rb = "(" if open_lo else "[", ")" if open_hi else "]"
    what = f"a number in {lb}{lo:g}, {hi:g}{rb}"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise bad(name, value, what)
    v = float(value)
    if not np.isfinite(v) or v < lo or v > hi or (open_lo and v == lo) or (open_hi and v == hi):
        raise bad(name, value, what)


def param_values(params: Any) -> dict[str, object]:
    """A parameter dataclass as a plain ``{name: value}`` dict (for provenance JSON)."""
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}


@dataclass(frozen=True, eq=False)
class Draw:
    """Sampled sequences and the hidden truth that generated them.

    Attributes:
        tokens: symbol ids, ``[episode, token]``.
        truth: latent variables by name: ``state`` ``[episode, token + 1]`` (the hidden
            state before each token and after the last) for hidden Markov processes,
            ``theta`` ``[episode]`` (the coin's bias) for ``coin-tokens``.
    """

    tokens: Int[np.ndarray, "episode token"]
    truth: Mapping[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class MixedStates:
    """The distinct beliefs reachable after ``depth`` tokens, with their probabilities.

    One level of the mixed-state presentation: every sequence of ``depth`` tokens of
    positive probability leads to one row; rows with equal beliefs are merged (their
    probabilities added). ``paths`` holds one representative sequence per row.
    """

    depth: int
    beliefs: Float[np.ndarray, "row state"]
    prob: Float[np.ndarray, " row"]
    next_token: Float[np.ndarray, "row symbol"]
    paths: Int[np.ndarray, "row token"]
    multiplicity: Int[np.ndarray, " row"]
    """How many sequences lead to each row."""


@dataclass(frozen=True, eq=False)
class Enumeration:
    """Every sequence of one length with positive probability, and its exact probability."""

    tokens: Int[np.ndarray, "row token"]
    prob: Float[np.ndarray, " row"]


@runtime_checkable
class TokenProcess(Protocol):
    """A token-level generative process with exact oracles at every position.

    ``name`` is the process's kebab-case name (given by :func:`token_process`); ``params`` its
    validated parameter
    dataclass; ``symbols`` the label of each symbol id; ``states`` the label of each
    belief coordinate (a hidden state, or a bin of the coin's bias); ``length`` the default
    number of tokens of a sequence.
    """

    name: str

    @property
    def params(self) -> Any:
        """The validated parameter dataclass."""
        ...

    @property
    def symbols(self) -> tuple[str, ...]:
        """The label of each symbol id."""
        ...

    @property
    def states(self) -> tuple[str, ...]:
        """The label of each coordinate of the belief."""
        ...

    @property
    def length(self) -> int:
        """Tokens per sequence unless a method is given another length."""
        ...

    def sample(self, n: int, seed: int, *, start: int = 0, length: int | None = None) -> Draw:
        """Episodes ``start .. start + n - 1``; episode ``i`` depends on ``(seed, i)`` only."""
        ...

    def sample_batch(self, n: int, rng: np.random.Generator, *,
                     length: int | None = None) -> Draw:
        """``n`` sequences drawn from one generator, vectorised (for training)."""
        ...

    def beliefs(self, tokens: np.ndarray) -> Float[np.ndarray, "episode turn state"]:
        """The exact belief after ``t`` tokens, ``t = 0..L``."""
        ...

    def next_token(self, tokens: np.ndarray) -> Float[np.ndarray, "episode turn symbol"]:
        """The exact distribution of token ``t`` given tokens ``0..t-1``, ``t = 0..L``."""
        ...

    def log_prob(self, tokens: np.ndarray) -> Float[np.ndarray, " episode"]:
        """The exact log-probability of each whole sequence."""
        ...

    def mixed_states(self, depth: int) -> tuple[MixedStates, ...]:
        """The mixed-state presentation to ``depth``: one level per depth ``0..depth``."""
        ...

    def enumerate_sequences(self, length: int | None = None) -> Enumeration:
        """Every sequence of ``length`` tokens with positive probability."""
        ...

    def optimal_cross_entropy(self, length: int | None = None) -> Float[np.ndarray, " turn"]:
        """The optimal predictor's expected cross-entropy (nats) of token ``t`` at turn
        ``t``, for ``t = 0..length - 1``."""
        ...

    def entropy_rate(self) -> float:
        """The limit of :meth:`optimal_cross_entropy` as the position grows (nats/token)."""
        ...


def as_tokens(tokens: object, vocab: int) -> Int[np.ndarray, "episode token"]:
    """``tokens`` as an int64 ``[episode, token]`` array of ids in ``0..vocab-1``, or one line
    (:class:`ParameterError`)."""
    arr = np.asarray(tokens)
    if arr.ndim != 2:
        raise ParameterError(
            f"tokens must be a 2-d [episode, token] array of symbol ids, got shape {arr.shape}"
        )
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"tokens must be integer symbol ids, got dtype {arr.dtype}")
    out = arr.astype(np.int64, copy=False)
    if out.size and (out.min() < 0 or out.max() >= vocab):
        raise ParameterError(
            f"tokens must be symbol ids in 0..{vocab - 1}, got values in "
            f"{out.min()}..{out.max()}"
        )
    return out


def entropy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy in nats over the last axis (``0 log 0 = 0``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    out: np.ndarray = terms.sum(axis=-1)
    return out


def episode_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of episode ``index`` under ``seed``: ``np.random.default_rng([seed,
    index])``, the derivation the text environments use (e.g. ``coin-flip``)."""
    return np.random.default_rng([seed, index])


def check_draw_args(n: int, seed: int, start: int) -> None:
    """Validate ``sample``'s counts and seed (non-negative integers)."""
    check_int("n", n, 0, 1 << 40)
    check_int("seed", seed, 0, (1 << 63) - 1)
    check_int("start", start, 0, 1 << 40)


class ProcessClass(Protocol):
    """What the process registry needs of a process class: its ``name`` (set by
    :func:`token_process`), its ``Params`` dataclass (fields carry ``help`` metadata), its
    docstring (the summary of its environment) and ``Class(params)``."""

    name: str
    Params: type[Any]
    __name__: str

    def __call__(self, params: Any) -> TokenProcess:
        """Build the process from validated parameters."""
        ...


PROCESSES: dict[str, ProcessClass] = {}
"""name -> process class, in the order the classes registered (modules in alphabetical order,
classes as each module defines them): :mod:`belieflens.envs.tokens.process` reads it."""

P = TypeVar("P", bound=type[Any])


def token_process(name: str) -> Callable[[P], P]:
    """Class decorator: register a process class under ``name``, the one place its name is
    written (it becomes the class's ``name``, and the name of its environment,
    :mod:`belieflens.envs.tokens.env`); a second class under a name already taken raises
    ``ValueError``.

    Examples:
        >>> from belieflens.envs.tokens.base import PROCESSES
        >>> PROCESSES["mess3"].__name__
        'Mess3'
    """

    def register(cls: P) -> P:
        known: object = PROCESSES.get(name)
        if known is not None and known is not cls:
            raise ValueError(f"token process name {name!r} is taken by {known!r}")
        cls.name = name
        PROCESSES[name] = cast(ProcessClass, cls)
        return cls

    return register
