"""Environments: generative processes with exact Bayesian oracles where one exists.

``names()`` lists the registered environments, ``get(name, **params)`` builds one
from typed values or CLI strings, ``describe(name)`` lists its parameters.
"""

from __future__ import annotations

import importlib
from typing import Any

from belieflens.envs.base import Environment, Episode, Message, Probe, Query, Turn
from belieflens.envs.params import ParamSpec, parse, specs
from belieflens.errors import ParameterError

# name -> "module:Class"; the class has a ``Params`` dataclass and is built as ``Class(params)``.
_REGISTRY: dict[str, str] = {
    "coin-flip": "belieflens.envs.coin_flip:CoinFlip",
    "recommender": "belieflens.envs.recommender:Recommender",
    "social-judgment": "belieflens.envs.judgment:SocialJudgment",
    "medical-triage": "belieflens.envs.judgment:MedicalTriage",
    "dice": "belieflens.envs.revealed.dice:Dice",
    "coins": "belieflens.envs.revealed.coins:Coins",
    "preference": "belieflens.envs.revealed.preference:Preference",
    "choice": "belieflens.envs.revealed.choice:Choice",
    "protein-world": "belieflens.envs.protein_world:ProteinWorld",
    "dutch-book": "belieflens.envs.dutch_book:DutchBook",
    "belief-attribution": "belieflens.envs.belief_attribution:BeliefAttribution",
    "case-study": "belieflens.envs.revealed.case_study:CaseStudy",
}


def names() -> list[str]:
    """The kebab-case names of all registered environments."""
    return list(_REGISTRY)


def _class(name: str) -> Any:
    if name not in _REGISTRY:
        raise ParameterError(
            f"unknown environment {name!r}: choose one of " + ", ".join(names())
        )
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def get(name: str, **params: object) -> Environment:
    """Build environment ``name``; parameter values may be typed or strings (as from ``--set``)."""
    cls = _class(name)
    env: Environment = cls(parse(cls.Params, params))
    return env


def describe(name: str) -> tuple[str, list[ParamSpec]]:
    """The environment's one-paragraph summary and its parameters."""
    cls = _class(name)
    doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return doc, specs(cls.Params)


__all__ = [
    "Environment",
    "Episode",
    "Message",
    "ParamSpec",
    "Probe",
    "Query",
    "Turn",
    "describe",
    "get",
    "names",
]
