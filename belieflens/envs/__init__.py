"""Environments: generative processes with exact Bayesian oracles where one exists.

Each environment family is one folder: its environment classes in ``env.py`` (each with its
``Params`` record and the report sections it owns, as function objects), the process, oracle
and prompts beside it, and its analysis (``report.py`` and the modules it uses). Adding an
environment touches its folder and one line of :data:`_REGISTRY`.

``names()`` lists the registered environments, ``get(name, **params)`` builds one from typed
values or CLI strings, ``describe(name)`` lists its parameters, ``sections_for(name)`` its
report sections.

Examples:
    >>> belieflens.envs.names()[:2]
    ['coin-flip', 'recommender']
    >>> env = belieflens.envs.get("coin-flip", turns="3")   # strings parse as from --set
    >>> env.params.turns
    3
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from belieflens.envs.belief_attribution.env import BeliefAttribution
from belieflens.envs.coin_flip.env import CoinFlip
from belieflens.envs.dutch_book.env import DutchBook
from belieflens.envs.judgment.env import MedicalTriage, SocialJudgment
from belieflens.envs.protein_world.env import ProteinWorld
from belieflens.envs.recommender.env import Recommender
from belieflens.envs.revealed.env import CaseStudy, Choice, Coins, Dice, Preference
from belieflens.envs.tokens.env import CoinTokensEnv, HMMEnv, Mess3Env, RRXOREnv, Z1REnv
from belieflens.envs.twenty_questions.env import TwentyQuestions
from belieflens.episodes.base import Environment, Episode, Message, Probe, Query, Turn
from belieflens.episodes.capabilities import FiniteGrid, NeedsGenerator, NeedsSimulator
from belieflens.episodes.params import ParamSpec, parse, specs
from belieflens.errors import ParameterError
from belieflens.report.section import SectionFn

if TYPE_CHECKING:
    import xarray as xr

    from belieflens.analysis.geometry import Target


class EnvironmentClass(Protocol):
    """What the registry needs of an environment class: its ``Params`` dataclass, the report
    sections it owns, and ``Class(params)``."""

    Params: type[Any]
    sections: tuple[SectionFn, ...]

    def __call__(self, params: Any) -> Environment:
        """Build the environment from validated parameters."""
        ...


_REGISTRY: dict[str, EnvironmentClass] = {
    "coin-flip": CoinFlip,
    "recommender": Recommender,
    "social-judgment": SocialJudgment,
    "medical-triage": MedicalTriage,
    "dice": Dice,
    "coins": Coins,
    "preference": Preference,
    "choice": Choice,
    "protein-world": ProteinWorld,
    "dutch-book": DutchBook,
    "belief-attribution": BeliefAttribution,
    "case-study": CaseStudy,
    "twenty-questions": TwentyQuestions,
    "coin-tokens": CoinTokensEnv,
    "mess3": Mess3Env,
    "rrxor": RRXOREnv,
    "z1r": Z1REnv,
    "hmm": HMMEnv,
}
"""name -> environment class, built as ``Class(params)`` from its ``Params`` dataclass."""


def names() -> list[str]:
    """The kebab-case names of all registered environments."""
    return list(_REGISTRY)


def environment_class(name: str) -> EnvironmentClass:
    """The class registered under ``name``; an unknown name raises :class:`ParameterError`."""
    if name not in _REGISTRY:
        raise ParameterError(
            f"unknown environment {name!r}: choose one of " + ", ".join(names())
        )
    return _REGISTRY[name]


def get(name: str, **params: object) -> Environment:
    """Build environment ``name``; parameter values may be typed or strings (as from ``--set``)."""
    cls = environment_class(name)
    env: Environment = cls(parse(cls.Params, params))
    return env


def describe(name: str) -> tuple[str, list[ParamSpec]]:
    """The environment's one-paragraph summary and its parameters."""
    cls = environment_class(name)
    doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return doc, specs(cls.Params)


def sections_for(name: str) -> tuple[SectionFn, ...]:
    """The report sections environment ``name`` owns, in its declared order (none for a name
    that is not a registered environment, e.g. a file written by another tool)."""
    return _REGISTRY[name].sections if name in _REGISTRY else ()


def readout_targets(ds: xr.Dataset) -> dict[str, Target]:
    """The belief-geometry targets the environment of a cache file defines (by name; none for
    an environment without a belief geometry): its read-outs' floors are compared on them
    (:func:`belieflens.analysis.floor.floor`)."""
    name = str(ds.attrs.get("env_name", ""))
    cls = _REGISTRY.get(name)
    targets = getattr(cls, "readout_targets", None)
    return dict(targets(ds)) if targets is not None else {}


__all__ = [
    "Environment",
    "EnvironmentClass",
    "Episode",
    "FiniteGrid",
    "Message",
    "NeedsGenerator",
    "NeedsSimulator",
    "ParamSpec",
    "Probe",
    "Query",
    "Turn",
    "describe",
    "environment_class",
    "get",
    "names",
    "readout_targets",
    "sections_for",
]
