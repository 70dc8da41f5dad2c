"""The named hidden Markov processes (``mess3``, ``rrxor``, ``z1r``) and ``hmm`` from a file.

Transition tensors follow ``epsilon-transformers`` (Shai et al., NeurIPS 2024),
``epsilon_transformers/process/processes.py``: ``Mess3``, ``RRXOR`` and ``ZeroOneR``, with
the same state order and symbol ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from jaxtyping import Float

from belieflens.envs.tokens.base import (
    Draw,
    Enumeration,
    MixedStates,
    check_float,
    check_int,
    token_process,
)
from belieflens.envs.tokens.hmm import HMM
from belieflens.episodes.params import bad, param
from belieflens.errors import ParameterError

MAX_LENGTH = 4096
"""The longest sequence a process parameter may ask for."""


def mess3_tensor(x: float, alpha: float) -> Float[np.ndarray, "symbol state state"]:
    """Mess3's ``T[symbol, from, to]``: 3 states A, B, C, 3 symbols; symbol ``k`` favours a move
    to state ``k`` (weight ``alpha``) and state ``k`` persists with weight ``1 - 2x``."""
    b = (1.0 - alpha) / 2.0
    y = 1.0 - 2.0 * x
    ay, bx, by, ax = alpha * y, b * x, b * y, alpha * x
    t = np.zeros((3, 3, 3))
    t[0] = [[ay, bx, bx], [ax, by, bx], [ax, bx, by]]
    t[1] = [[by, ax, bx], [bx, ay, bx], [bx, ax, by]]
    t[2] = [[by, bx, ax], [bx, by, ax], [bx, bx, ay]]
    return t


def rrxor_tensor(p1: float, p2: float) -> Float[np.ndarray, "symbol state state"]:
    """RRXOR's ``T``: two random bits (P(0) = ``p1``, then ``p2``), then their XOR; states
    S, 0, 1, T, F."""
    s, zero, one, true, false = range(5)
    t = np.zeros((2, 5, 5))
    t[0, s, zero] = p1
    t[1, s, one] = 1.0 - p1
    t[0, zero, false] = p2
    t[1, zero, true] = 1.0 - p2
    t[0, one, true] = p2
    t[1, one, false] = 1.0 - p2
    t[1, true, s] = 1.0
    t[0, false, s] = 1.0
    return t


def z1r_tensor(p: float) -> Float[np.ndarray, "symbol state state"]:
    """Zero-one-random's ``T``: ``0``, then ``1``, then a random bit (P(0) = ``p``); states
    0, 1, R."""
    zero, one, r = range(3)
    t = np.zeros((2, 3, 3))
    t[0, zero, one] = 1.0
    t[1, one, r] = 1.0
    t[0, r, zero] = p
    t[1, r, zero] = 1.0 - p
    return t


class HMMProcess:
    """A token-level process backed by an :class:`HMM`, with the :class:`~.base.TokenProcess`
    interface. Beliefs are over the hidden states; sequences start from the stationary
    distribution. Each subclass registers itself with :func:`~.base.token_process`, which
    gives it its ``name``."""

    name: str

    def __init__(self, params: Any, hmm: HMM, symbols: tuple[str, ...],
                 states: tuple[str, ...], length: int) -> None:
        name = self.name
        if len(symbols) != hmm.vocab:
            raise ParameterError(
                f"process {name!r} has {hmm.vocab} symbols but {len(symbols)} symbol labels"
            )
        if len(states) != hmm.n_states:
            raise ParameterError(
                f"process {name!r} has {hmm.n_states} states but {len(states)} state labels"
            )
        if len(set(symbols)) != len(symbols) or any(not s or s != s.strip() or " " in s
                                                     for s in symbols):
            raise ParameterError(
                f"process {name!r}: symbol labels must be distinct non-empty words without "
                f"spaces, got {list(symbols)}"
            )
        self._params = params
        self._hmm = hmm
        self._symbols = symbols
        self._states = states
        self._length = length

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self._params!r})"

    @property
    def params(self) -> Any:
        """The validated parameter dataclass."""
        return self._params

    @property
    def hmm(self) -> HMM:
        """The transition tensor and its oracles."""
        return self._hmm

    @property
    def symbols(self) -> tuple[str, ...]:
        """The label of each symbol id."""
        return self._symbols

    @property
    def states(self) -> tuple[str, ...]:
        """The label of each hidden state."""
        return self._states

    @property
    def length(self) -> int:
        """Tokens per sequence by default."""
        return self._length

    def _len(self, length: int | None) -> int:
        if length is None:
            return self._length
        check_int("length", length, 0, MAX_LENGTH)
        return int(length)

    def sample(self, n: int, seed: int, *, start: int = 0, length: int | None = None) -> Draw:
        """Episodes ``start .. start + n - 1``; episode ``i`` depends on ``(seed, i)`` only
        (``np.random.default_rng([seed, i])``). ``truth["state"]`` is the hidden path."""
        return self._hmm.sample(n, seed, self._len(length), start=start)

    def sample_batch(self, n: int, rng: np.random.Generator, *,
                     length: int | None = None) -> Draw:
        """``n`` sequences drawn from one generator, vectorised (for training)."""
        check_int("n", n, 0, 1 << 40)
        return self._hmm.sample_batch(n, rng, self._len(length))

    def beliefs(self, tokens: object) -> Float[np.ndarray, "episode turn state"]:
        """The exact belief over hidden states after ``t`` tokens, ``t = 0..L``."""
        return self._hmm.forward(tokens)

    def next_token(self, tokens: object) -> Float[np.ndarray, "episode turn symbol"]:
        """The exact distribution of token ``t`` given tokens ``0..t-1``, ``t = 0..L``:
        belief times emission matrix."""
        return self._hmm.next_token(self._hmm.forward(tokens))

    def log_prob(self, tokens: object) -> Float[np.ndarray, " episode"]:
        """The exact log-probability of each whole sequence."""
        return self._hmm.log_prob(tokens)

    def mixed_states(self, depth: int) -> tuple[MixedStates, ...]:
        """The mixed-state presentation to ``depth`` (equal beliefs merged)."""
        return self._hmm.mixed_states(depth)

    def enumerate_sequences(self, length: int | None = None) -> Enumeration:
        """Every sequence of ``length`` tokens of positive probability, with its probability."""
        return self._hmm.enumerate_sequences(self._len(length))

    def optimal_cross_entropy(self, length: int | None = None) -> Float[np.ndarray, " turn"]:
        """``H(X_t | X_<t)`` in nats, ``t = 0..length - 1``: the optimal predictor's expected
        cross-entropy at each position."""
        return self._hmm.conditional_entropy(self._len(length))

    def entropy_rate(self) -> float:
        """The entropy rate in nats/token (see :meth:`HMM.entropy_rate_bounds` for its
        precision)."""
        return self._hmm.entropy_rate()


def _check_length(length: object) -> None:
    check_int("length", length, 1, MAX_LENGTH)


@dataclass(frozen=True)
class Mess3Params:
    """Parameters of ``mess3``."""

    x: float = param(0.05, "probability weight of each move away from a state, in (0, 0.5)")
    alpha: float = param(0.85, "weight of the symbol that names the next state, in (0, 1)")
    length: int = param(10, "tokens per sequence (>= 1)")

    def __post_init__(self) -> None:
        check_float("x", self.x, 0.0, 0.5, open_lo=True, open_hi=True)
        check_float("alpha", self.alpha, 0.0, 1.0, open_lo=True, open_hi=True)
        _check_length(self.length)


@dataclass(frozen=True)
class RRXORParams:
    """Parameters of ``rrxor``."""

    p1: float = param(0.5, "P(first random bit = 0), in (0, 1)")
    p2: float = param(0.5, "P(second random bit = 0), in (0, 1)")
    length: int = param(10, "tokens per sequence (>= 1)")

    def __post_init__(self) -> None:
        check_float("p1", self.p1, 0.0, 1.0, open_lo=True, open_hi=True)
        check_float("p2", self.p2, 0.0, 1.0, open_lo=True, open_hi=True)
        _check_length(self.length)


@dataclass(frozen=True)
class Z1RParams:
    """Parameters of ``z1r``."""

    p: float = param(0.5, "P(the random symbol = 0), in (0, 1)")
    length: int = param(10, "tokens per sequence (>= 1)")

    def __post_init__(self) -> None:
        check_float("p", self.p, 0.0, 1.0, open_lo=True, open_hi=True)
        _check_length(self.length)


@dataclass(frozen=True)
class HMMFileParams:
    """Parameters of ``hmm``: a transition tensor read from a file."""

    path: str | None = param(
        None, "a .npz (array 'T', optional 'symbols', 'states') or .json ({\"T\": [...], "
        "optional \"symbols\", \"states\"}, or the bare nested list) file of T[token, from, to]; "
        "none: the packaged example, the golden-mean process"
    )
    length: int = param(10, "tokens per sequence (>= 1)")

    def __post_init__(self) -> None:
        if self.path is not None and (not isinstance(self.path, str) or not self.path):
            raise bad("path", self.path, "the path of a .npz or .json file, or none")
        _check_length(self.length)


@token_process("mess3")
class Mess3(HMMProcess):
    """Mess3 (x, alpha): a 3-state hidden Markov process whose beliefs form a fractal in the
    2-simplex (Shai et al., NeurIPS 2024); symbols 0, 1, 2, states A, B, C.

    Mess3 (Marzen & Crutchfield) is non-unifilar: its mixed states form the fractal.

    Examples:
        >>> belieflens.envs.get("mess3").process.states
        ('A', 'B', 'C')
    """

    Params: ClassVar[type[Mess3Params]] = Mess3Params

    def __init__(self, params: Mess3Params) -> None:
        super().__init__(params, HMM(mess3_tensor(params.x, params.alpha)),
                         ("0", "1", "2"), ("A", "B", "C"), params.length)


@token_process("rrxor")
class RRXOR(HMMProcess):
    """RRXOR: two random bits then their XOR; beliefs over its 5 states are spread across
    layers and are not a function of the next-token prediction (Shai et al.).

    Examples:
        >>> len(belieflens.envs.get("rrxor").process.states)
        5
    """

    Params: ClassVar[type[RRXORParams]] = RRXORParams

    def __init__(self, params: RRXORParams) -> None:
        super().__init__(params, HMM(rrxor_tensor(params.p1, params.p2)),
                         ("0", "1"), ("S", "0", "1", "T", "F"), params.length)


@token_process("z1r")
class Z1R(HMMProcess):
    """Zero-one-random: ``0``, ``1``, then a random bit; beliefs over its 3 states.

    The periodic ``0, 1, random`` process.

    Examples:
        >>> belieflens.envs.get("z1r").process.symbols
        ('0', '1')
    """

    Params: ClassVar[type[Z1RParams]] = Z1RParams

    def __init__(self, params: Z1RParams) -> None:
        super().__init__(params, HMM(z1r_tensor(params.p)), ("0", "1"),
                         ("0", "1", "R"), params.length)


EXAMPLE_HMM = Path(__file__).resolve().parents[2] / "data" / "hmm" / "golden-mean.json"
"""``hmm``'s default file: the golden-mean process (no two 0s in a row), 2 states."""


@token_process("hmm")
class HMMFile(HMMProcess):
    """A hidden Markov process read from a file: a transition tensor ``T[token, from, to]``
    (``.npz`` or JSON); sequences start from the stationary distribution. Without ``path``,
    the packaged golden-mean process.

    Examples:
        >>> belieflens.envs.get("hmm").process.states   # the golden-mean example
        ('A', 'B')
    """

    Params: ClassVar[type[HMMFileParams]] = HMMFileParams

    def __init__(self, params: HMMFileParams) -> None:
        tensor, symbols, states = read_tensor(
            Path(params.path) if params.path is not None else EXAMPLE_HMM)
        try:
            hmm = HMM(tensor)
        except ParameterError as e:
            raise ParameterError(f"{params.path}: {e}") from None
        symbols = symbols or tuple(str(i) for i in range(hmm.vocab))
        states = states or tuple(str(i) for i in range(hmm.n_states))
        super().__init__(params, hmm, symbols, states, params.length)


def _labels(raw: object, what: str, path: Path) -> tuple[str, ...] | None:
    if raw is None:
        return None
    values = np.asarray(raw).reshape(-1).tolist() if not isinstance(raw, list) else raw
    if not all(isinstance(v, (str, int)) for v in values):
        raise ParameterError(f"{path}: {what} must be a list of strings")
    return tuple(str(v) for v in values)


def read_tensor(path: Path) -> tuple[np.ndarray, tuple[str, ...] | None, tuple[str, ...] | None]:
    """``(T, symbols, states)`` from a ``.npz`` or ``.json`` file; labels are ``None`` where
    the file has none. Any problem is one line (:class:`ParameterError`)."""
    if not path.is_file():
        raise bad("path", str(path), "an existing .npz or .json file")
    suffix = path.suffix.lower()
    raw: Any
    symbols: object = None
    states: object = None
    if suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as z:
                keys = list(z.keys())
                key = next((k for k in ("T", "transition") if k in keys), None)
                if key is None and len(keys) == 1:
                    key = keys[0]
                if key is None:
                    raise ParameterError(
                        f"{path}: no array named 'T' (arrays: {', '.join(keys) or 'none'})"
                    )
                raw = z[key]
                symbols = z["symbols"] if "symbols" in keys else None
                states = z["states"] if "states" in keys else None
        except ParameterError:
            raise
        except Exception as e:  # zipfile, pickle refusal, OS errors: all one line
            raise ParameterError(f"{path}: not a readable .npz file ({type(e).__name__})"
                                 ) from None
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ParameterError(f"{path}: not a readable JSON file ({e})") from None
        if isinstance(data, dict):
            if "T" not in data:
                raise ParameterError(f"{path}: the JSON object has no key 'T'")
            raw, symbols, states = data["T"], data.get("symbols"), data.get("states")
        else:
            raw = data
    else:
        raise bad("path", str(path), "a .npz or .json file")
    return raw, _labels(symbols, "symbols", path), _labels(states, "states", path)
