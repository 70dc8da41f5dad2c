"""The token processes register themselves: the name is written once, on the class's
decorator; the process API and the environments of the same names read the registry, and no
module but the process's own (and ``train/``'s recipes) holds a process's name in its code."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from belieflens import envs
from belieflens.envs.tokens import process as P
from belieflens.envs.tokens.base import PROCESSES, token_process
from belieflens.envs.tokens.env import ENVIRONMENTS, TokenEnvironment
from belieflens.errors import ParameterError
from tests.envs.test_names_stay_in_envs import PACKAGE, names_in_code

ALLOWED = ("train",)
"""Top-level folders whose code may name a process: ``train/``'s recipes pick one as a user's
script would."""


def test_the_api_reads_the_registry() -> None:
    assert P.names() == list(PROCESSES)
    assert {"coin-tokens", "mess3", "rrxor", "z1r", "hmm"} <= set(P.names())
    for name, cls in PROCESSES.items():
        assert cls.name == name
        assert P.params_class(name) is cls.Params
        assert isinstance(P.get(name), cls)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="unknown process 'nope': choose one of coin-tokens"):
        P.get("nope")


def test_every_process_is_an_environment_of_its_name() -> None:
    names = envs.names()
    assert [n for n in names if n in PROCESSES] == list(PROCESSES)  # registration order
    for name, cls in PROCESSES.items():
        env_cls = envs.environment_class(name)
        assert env_cls is ENVIRONMENTS[name]
        assert issubclass(env_cls, TokenEnvironment)
        assert env_cls.Params is cls.Params and env_cls.__doc__ == cls.__doc__
        assert getattr(env_cls, "__name__", "") == f"{cls.__name__}Env"
        assert getattr(sys.modules[env_cls.__module__], f"{cls.__name__}Env") is env_cls
        env = envs.get(name)
        assert isinstance(getattr(env, "process", None), cls)  # type: ignore[arg-type]
        assert dataclasses.asdict(env.params) == dataclasses.asdict(cls.Params())
    control = envs.positive_control("coin-tokens")
    assert control is not None and control.env == "coin-flip"
    assert envs.positive_control("mess3") is None


def test_a_taken_name_is_refused() -> None:
    impostor = type("Impostor", (), {"Params": object})
    with pytest.raises(ValueError, match="'mess3' is taken"):
        token_process("mess3")(impostor)
    assert PROCESSES["mess3"].__name__ == "Mess3"


def test_no_process_name_outside_its_own_module() -> None:
    found = []
    for name, cls in PROCESSES.items():
        home = Path(sys.modules[cls.__module__].__file__ or "")
        found += [hit for p in sorted(PACKAGE.rglob("*.py"))
                  if p != home and p.relative_to(PACKAGE).parts[0] not in ALLOWED
                  for hit in names_in_code(p, {name})]
    assert not found, "token-process names outside their own module:\n" + "\n".join(found)
