"""Environments: generative processes with exact Bayesian oracles where one exists.

Each environment family is one folder: its environment classes in ``env.py`` (each with its
``name``, its ``Params`` record and the report sections it owns, as function objects, and
registered by :func:`belieflens.envs.registry.register`), the process, oracle and prompts
beside it, and its analysis (``report.py`` and the modules it uses). The folders are found at
import, so adding an environment is its folder, its docs page and its tests.

``names()`` lists the registered environments, ``get(name, **params)`` builds one from typed
values or CLI strings, ``describe(name)`` lists its parameters, ``sections_for(name)`` its
report sections.

Examples:
    >>> belieflens.envs.names()[:2]
    ['belief-attribution', 'coin-flip']
    >>> env = belieflens.envs.get("coin-flip", turns="3")   # strings parse as from --set
    >>> env.params.turns
    3
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
from typing import TYPE_CHECKING

import numpy as np

from belieflens.envs.registry import REGISTRY, EnvironmentClass, register
from belieflens.episodes.base import Environment, Episode, Message, Probe, Query, Turn
from belieflens.episodes.capabilities import (
    ControlOf,
    FiniteGrid,
    NeedsGenerator,
    NeedsSimulator,
    StatisticFeatures,
)
from belieflens.episodes.params import ParamSpec, parse, specs
from belieflens.errors import ParameterError
from belieflens.report.section import SectionFn

if TYPE_CHECKING:
    import xarray as xr

    from belieflens.analysis.geometry import Target


def _discover() -> None:
    """Import every environment folder's ``env`` module (folders in alphabetical order), whose
    classes register themselves (:func:`belieflens.envs.registry.register`)."""
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.ispkg and importlib.util.find_spec(f"{__name__}.{module.name}.env"):
            importlib.import_module(f"{__name__}.{module.name}.env")


_discover()


def names() -> list[str]:
    """The kebab-case names of all registered environments."""
    return list(REGISTRY)


def environment_class(name: str) -> EnvironmentClass:
    """The class registered under ``name``; an unknown name raises :class:`ParameterError`."""
    if name not in REGISTRY:
        raise ParameterError(
            f"unknown environment {name!r}: choose one of " + ", ".join(names())
        )
    return REGISTRY[name]


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
    return REGISTRY[name].sections if name in REGISTRY else ()


def readout_targets(ds: xr.Dataset) -> dict[str, Target]:
    """The belief-geometry targets the environment of a cache file defines (by name; none for
    an environment without a belief geometry): its read-outs' floors are compared on them
    (:func:`belieflens.analysis.floor.floor`)."""
    name = str(ds.attrs.get("env_name", ""))
    cls = REGISTRY.get(name)
    targets = getattr(cls, "readout_targets", None)
    return dict(targets(ds)) if targets is not None else {}


def statistic_features(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """The statistic baselines' features of every read-out of a cache file, by name, each
    ``[query, feature]`` (none for an environment that declares none,
    :class:`~belieflens.episodes.capabilities.StatisticFeatures`, or whose episodes its
    provenance cannot rebuild). The environment is rebuilt from the file's provenance (its
    name, parameters and seed: episodes are deterministic in the seed) and asked for the
    features of each episode the file holds; each read-out takes its episode's row of its
    turn. The decoders' statistic baselines are fitted on them
    (:mod:`belieflens.analysis.baselines`)."""
    name = str(ds.attrs.get("env_name", ""))
    if name not in REGISTRY:
        return {}
    try:
        env = get(name, **json.loads(str(ds.attrs.get("env_params", "{}"))))
        seed = int(np.asarray(ds.attrs["seed"]).reshape(-1)[0])
    except (ParameterError, ValueError, TypeError, KeyError):
        return {}
    if not isinstance(env, StatisticFeatures):
        return {}
    episode = np.asarray(ds["episode"].values, dtype=np.int64)
    turn = np.asarray(ds["turn"].values, dtype=np.int64)
    wanted = set(np.unique(episode).tolist())
    per: dict[int, dict[str, np.ndarray]] = {}
    for ep in env.episodes(max(wanted) + 1, seed):
        if ep.index in wanted:
            per[ep.index] = {k: np.asarray(v, dtype=np.float64)
                             for k, v in env.statistic_features(ep).items()}
    first = per[min(per)]
    if set(per) != wanted or any(int(t) >= len(per[int(e)][next(iter(first))])
                                 for e, t in zip(episode, turn, strict=True)):
        return {}  # not the file's episodes (a turn the rebuilt episode lacks)
    return {k: np.stack([per[int(e)][k][int(t)] for e, t in zip(episode, turn, strict=True)])
            for k in first}


def positive_control(name: str) -> ControlOf | None:
    """What environment ``name`` is a positive control of (its class's ``control_of``:
    :class:`belieflens.episodes.capabilities.ControlOf`), or ``None``; a study of it may stand
    beside a study of that environment in :func:`belieflens.analysis.compare.compare`."""
    control = getattr(REGISTRY.get(name), "control_of", None)
    return control if isinstance(control, ControlOf) else None


def grid_counts(name: str) -> str | None:
    """The prompt counts of environment ``name``'s grid at its default parameters, as
    ``belieflens envs`` prints them (``None``: it enumerates no grid)."""
    from belieflens.envs.revealed.counts import counts_line

    return counts_line(name, get(name))


__all__ = [
    "ControlOf",
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
    "StatisticFeatures",
    "Turn",
    "describe",
    "environment_class",
    "get",
    "grid_counts",
    "names",
    "positive_control",
    "readout_targets",
    "register",
    "sections_for",
    "statistic_features",
]
