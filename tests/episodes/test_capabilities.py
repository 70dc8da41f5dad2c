"""Capabilities are structural (runtime-checkable Protocols) and the registry builds every
environment class from its own ``Params``, without strings of module paths."""

from __future__ import annotations

import dataclasses

import pytest

from belieflens import envs
from belieflens.episodes.capabilities import (
    FiniteGrid,
    NeedsGenerator,
    NeedsSimulator,
    StatisticFeatures,
)
from belieflens.errors import ParameterError
from belieflens.run.generation_log import requires_generator, requires_simulator

GENERATING = {"recommender", "social-judgment", "medical-triage", "protein-world", "dutch-book",
              "belief-attribution", "twenty-questions"}
SIMULATING = {"social-judgment", "medical-triage", "twenty-questions"}
MODEL_DRIVEN = {"twenty-questions"}
"""Environments played by the model itself: they need a model (and its simulator) always."""
OWN_ANSWERS = {"belief-attribution", "recommender", "protein-world"}
"""Environments whose published protocol (the default) runs on the model's own replies: they
need a model by default, but no simulator."""
GRIDS = {"dice", "coins", "preference", "choice", "case-study"}
STATISTICS = {"coin-flip", "coin-tokens", "mess3", "rrxor", "z1r", "hmm"}
"""Environments that declare statistic baselines: the coin flip (counts, turn, last flips) and
the token processes (turn, last tokens; coin-tokens its counts too)."""


@pytest.mark.parametrize("name", envs.names())
def test_capabilities_of_every_environment(name: str) -> None:
    env = envs.get(name)
    assert isinstance(env, envs.Environment)
    assert isinstance(env, NeedsGenerator) == (name in GENERATING)
    assert isinstance(env, NeedsSimulator) == (name in SIMULATING)
    assert isinstance(env, FiniteGrid) == (name in GRIDS)
    assert isinstance(env, StatisticFeatures) == (name in STATISTICS)
    # the defaults never need a model, but for the environments the model plays
    assert requires_simulator(env) == (name in MODEL_DRIVEN)
    assert requires_generator(env) == (name in MODEL_DRIVEN | OWN_ANSWERS)
    # parameters are a dataclass instance: asdict needs no cast
    assert isinstance(dataclasses.asdict(env.params), dict)


def test_parameters_switch_the_needs_on() -> None:
    assert requires_generator(envs.get("dutch-book", answers="model"))
    assert not requires_simulator(envs.get("dutch-book", answers="model"))
    assert requires_simulator(envs.get("medical-triage", engagement="active"))
    assert not requires_simulator(envs.get("medical-triage", delivery="multi-turn-self"))
    assert requires_generator(envs.get("medical-triage", delivery="multi-turn-self"))


def test_registry_classes() -> None:
    for name in envs.names():
        cls = envs.environment_class(name)
        env = cls(cls.Params())
        assert env.name == name
        assert envs.describe(name)[0]
    with pytest.raises(ParameterError, match="unknown environment 'nope'"):
        envs.get("nope")
    with pytest.raises(ParameterError, match="unknown environment"):
        envs.describe("nope")
