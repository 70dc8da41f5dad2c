"""Token-level processes with exact oracles: the registry.

Each process is a class registered with :func:`~belieflens.envs.tokens.base.token_process`,
which writes its name once; every module of this folder but the environment's own (``env``,
``report``) is imported here, so adding a process is its class, its docs page and its tests.
The registered processes, with their parameters, are in :func:`names` and the environments
of the same names (:mod:`belieflens.envs.tokens.env`); ``get(name, **params)`` builds one.
The shipped ones:

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
import importlib
import pkgutil
from pathlib import Path
from typing import Any

from belieflens.envs.tokens.base import (
    PROCESSES,
    Draw,
    Enumeration,
    MixedStates,
    ProcessClass,
    TokenProcess,
    param_values,
    token_process,
)
from belieflens.envs.tokens.hmm import HMM, check_transition
from belieflens.errors import ParameterError

__all__ = [
    "HMM",
    "PROCESSES",
    "Draw",
    "Enumeration",
    "MixedStates",
    "ProcessClass",
    "TokenProcess",
    "check_transition",
    "get",
    "names",
    "param_values",
    "params_class",
    "process_class",
    "token_process",
]

ENVIRONMENT_MODULES = ("env", "report")
"""The modules of this folder that make the processes an environment (they import this one);
every other module may define processes."""


def _discover() -> None:
    """Import every module of this folder but :data:`ENVIRONMENT_MODULES` (in alphabetical
    order): the process classes in them register themselves."""
    package = __name__.rpartition(".")[0]
    for module in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]),
                         key=lambda m: m.name):
        if module.name not in ENVIRONMENT_MODULES:
            importlib.import_module(f"{package}.{module.name}")


_discover()


def names() -> list[str]:
    """The names of the token-level processes, in registration order."""
    return list(PROCESSES)


def process_class(name: str) -> ProcessClass:
    """The class registered under ``name``; an unknown name is one line
    (:class:`ParameterError`)."""
    if name not in PROCESSES:
        raise ParameterError(
            f"unknown process {name!r}: choose one of " + ", ".join(names())
        )
    return PROCESSES[name]


def params_class(name: str) -> type[Any]:
    """The parameter dataclass of process ``name`` (fields carry ``help`` metadata)."""
    return process_class(name).Params


def get(name: str, **params: Any) -> TokenProcess:
    """Build process ``name`` from typed parameter values; an unknown name or parameter, or a
    bad value, is one line (:class:`ParameterError`)."""
    cls = process_class(name)
    allowed = [f.name for f in dataclasses.fields(cls.Params)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ParameterError(
            f"unknown parameter {unknown[0]!r} of process {name!r}: choose from "
            + ", ".join(allowed)
        )
    return cls(cls.Params(**params))
