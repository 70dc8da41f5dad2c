"""The environment registry: each environment class registers itself with :func:`register`
under its ``name`` (written once, on the class), and :mod:`belieflens.envs` discovers every
environment folder's ``env`` module, so adding an environment is its folder, its docs page and
its tests.

Callers outside ``envs/`` never test a name: they ask the class for a capability (its report
``sections``, ``readout_targets``, ``control_of``: :mod:`belieflens.episodes.capabilities`).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, cast

from belieflens.episodes.base import Environment
from belieflens.report.section import SectionFn


class EnvironmentClass(Protocol):
    """What the registry needs of an environment class: its ``name``, its ``Params``
    dataclass, the report sections it owns, and ``Class(params)``."""

    name: str
    Params: type[Any]
    sections: tuple[SectionFn, ...]

    def __call__(self, params: Any) -> Environment:
        """Build the environment from validated parameters."""
        ...


C = TypeVar("C", bound=type[Any])

REGISTRY: dict[str, EnvironmentClass] = {}
"""name -> environment class, in the order the classes registered (folders in alphabetical
order, classes as each ``env`` module defines them)."""


def register(cls: C) -> C:
    """Class decorator: register ``cls`` under ``cls.name``; a second class under a name
    already taken raises ``ValueError`` (two folders claiming one name is a bug)."""
    name = str(getattr(cls, "name", ""))
    if not name:
        raise ValueError(f"{cls.__qualname__} has no name to register under")
    known: object = REGISTRY.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"environment name {name!r} is taken by {known!r}")
    REGISTRY[name] = cast(EnvironmentClass, cls)
    return cls
