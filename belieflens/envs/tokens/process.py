"""Token-level processes with exact oracles: the registry.

``get(name, **params)`` builds one of :data:`PROCESS_NAMES`:

- ``coin-tokens``: Beta-Bernoulli flips (``a``, ``b``, ``length``, ``bins``); the belief is
  the posterior over the bias, the next token the posterior predictive
  (:mod:`belieflens.envs.tokens.coin`);
- ``mess3`` (``x``, ``alpha``), ``rrxor`` (``p1``, ``p2``), ``z1r`` (``p``): the hidden
  Markov processes of Shai et al. (NeurIPS 2024), beliefs over hidden states
  (:mod:`belieflens.envs.tokens.named`);
- ``hmm``: a transition tensor ``T[token, from, to]`` read from ``path`` (.npz or JSON).

Every process follows :class:`TokenProcess`: seeded sampling (episode ``i`` of seed ``s``
depends on ``(s, i)`` only), beliefs and next-token distributions at every position, the
optimal predictor's cross-entropy per position, the entropy rate and exact enumeration.
Pure numpy (scipy for the Beta function); nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args

from belieflens.envs.tokens.base import (
    Draw,
    Enumeration,
    MixedStates,
    TokenProcess,
    param_values,
)
from belieflens.envs.tokens.coin import CoinTokens, CoinTokensParams
from belieflens.envs.tokens.hmm import HMM, check_transition
from belieflens.envs.tokens.named import (
    RRXOR,
    Z1R,
    HMMFile,
    HMMFileParams,
    HMMProcess,
    Mess3,
    Mess3Params,
    RRXORParams,
    Z1RParams,
)
from belieflens.errors import ParameterError

__all__ = [
    "HMM",
    "PROCESS_NAMES",
    "RRXOR",
    "Z1R",
    "CoinTokens",
    "CoinTokensParams",
    "Draw",
    "Enumeration",
    "HMMFile",
    "HMMFileParams",
    "HMMProcess",
    "Mess3",
    "Mess3Params",
    "MixedStates",
    "ProcessName",
    "RRXORParams",
    "TokenProcess",
    "Z1RParams",
    "check_transition",
    "get",
    "names",
    "param_values",
    "params_class",
]

ProcessName = Literal["coin-tokens", "mess3", "rrxor", "z1r", "hmm"]
"""The names of the token-level processes."""

PROCESS_NAMES: tuple[ProcessName, ...] = get_args(ProcessName)
"""All process names, in order."""

_REGISTRY: dict[str, Any] = {
    "coin-tokens": CoinTokens,
    "mess3": Mess3,
    "rrxor": RRXOR,
    "z1r": Z1R,
    "hmm": HMMFile,
}


def names() -> list[str]:
    """The names of the token-level processes."""
    return list(PROCESS_NAMES)


def _class(name: str) -> Any:
    if name not in _REGISTRY:
        raise ParameterError(
            f"unknown process {name!r}: choose one of " + ", ".join(PROCESS_NAMES)
        )
    return _REGISTRY[name]


def params_class(name: str) -> type[Any]:
    """The parameter dataclass of process ``name`` (fields carry ``help`` metadata)."""
    cls: type[Any] = _class(name).Params
    return cls


def get(name: str, **params: Any) -> TokenProcess:
    """Build process ``name`` from typed parameter values; an unknown name or parameter, or a
    bad value, is one line (:class:`ParameterError`)."""
    cls = _class(name)
    allowed = [f.name for f in dataclasses.fields(cls.Params)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ParameterError(
            f"unknown parameter {unknown[0]!r} of process {name!r}: choose from "
            + ", ".join(allowed)
        )
    process: TokenProcess = cls(cls.Params(**params))
    return process
