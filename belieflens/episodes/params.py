"""Environment parameters: typed frozen dataclasses parsed uniformly from ``--set NAME=VALUE``.

Each environment declares its parameters as a frozen dataclass whose fields carry
a ``help`` text in their metadata and validate themselves in ``__post_init__``
by raising :class:`~belieflens.errors.ParameterError` with one line naming the
parameter, the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args, get_origin

from belieflens.errors import ParameterError

P = TypeVar("P")


def param(default: Any, help: str) -> Any:
    """Declare a parameter field with a default and a one-line help text."""
    return dataclasses.field(default=default, metadata={"help": help})


def bad(name: str, value: object, allowed: str) -> ParameterError:
    """The uniform one-line parameter error."""
    return ParameterError(f"parameter '{name}' = {value!r} is not allowed: {allowed}")


def int_in(name: str, value: int, lo: int, hi: int) -> None:
    """Refuse the integer parameter ``name`` outside ``lo..hi`` (:func:`bad`)."""
    if not lo <= value <= hi:
        raise bad(name, value, f"an integer in {lo}..{hi}")


def positive(name: str, value: float) -> None:
    """Refuse the number parameter ``name`` unless it is above 0 (:func:`bad`)."""
    if not value > 0:
        raise bad(name, value, "a number > 0")


def check_temperature(name: str, value: float) -> None:
    """Refuse the sampling temperature ``name`` outside [0, 5] (:func:`bad`)."""
    if not 0.0 <= value <= 5.0:
        raise bad(name, value, "a number in [0, 5]")


@dataclass(frozen=True)
class ParamSpec:
    """One parameter as ``belieflens envs`` lists it."""

    name: str
    type: str
    default: object
    help: str


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "|".join(str(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "none"
    return getattr(tp, "__name__", str(tp))


def specs(cls: type[Any]) -> list[ParamSpec]:
    """The parameters of a parameter dataclass, with their types, defaults and help."""
    hints = typing.get_type_hints(cls)
    return [
        ParamSpec(f.name, _type_name(hints[f.name]), f.default, str(f.metadata.get("help", "")))
        for f in dataclasses.fields(cls)
    ]


def _convert(name: str, tp: Any, raw: object) -> object:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = get_args(tp)
        is_none = raw is None or (isinstance(raw, str) and raw.lower() in ("none", ""))
        if is_none and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(name, option, raw)
            except ParameterError as e:
                errors.append(str(e))
        raise bad(name, raw, f"expected {_type_name(tp)}")
    if origin is Literal:
        choices = get_args(tp)
        for c in choices:
            if raw == c or str(raw) == str(c):
                return c
        raise bad(name, raw, "one of " + ", ".join(str(c) for c in choices))
    if tp is bool:
        if isinstance(raw, bool):
            return raw
        s = str(raw).lower()
        if s in ("1", "true", "yes", "on"):
            return True
        if s in ("0", "false", "no", "off"):
            return False
        raise bad(name, raw, "true or false")
    if tp is int:
        if isinstance(raw, bool):
            raise bad(name, raw, "an integer")
        if isinstance(raw, int):
            return raw
        try:
            return int(str(raw))
        except ValueError:
            raise bad(name, raw, "an integer") from None
    if tp is float:
        if isinstance(raw, bool):
            raise bad(name, raw, "a number")
        try:
            value = float(str(raw)) if not isinstance(raw, (int, float)) else float(raw)
        except ValueError:
            raise bad(name, raw, "a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise bad(name, raw, "a finite number")
        return value
    if tp is str:
        if not isinstance(raw, str):
            raise bad(name, raw, "a string")
        return raw
    raise bad(name, raw, f"unsupported parameter type {_type_name(tp)}")


def parse(cls: type[P], raw: Mapping[str, object]) -> P:
    """Build ``cls`` from raw values (strings from the CLI, or typed values from Python).

    Unknown names, unconvertible values and values the dataclass rejects all raise
    :class:`ParameterError` with one line.
    """
    assert dataclasses.is_dataclass(cls)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, object] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name not in names:
            raise ParameterError(
                f"unknown parameter '{key}': allowed are " + ", ".join(names)
            )
        kwargs[name] = _convert(name, hints[name], value)
    try:
        return cls(**kwargs)
    except ParameterError:
        raise
    except (TypeError, ValueError) as e:
        raise ParameterError(str(e).splitlines()[0]) from None


def parse_assignments(items: list[str]) -> dict[str, str]:
    """Split ``NAME=VALUE`` strings (from repeated ``--set``) into a mapping."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"--set expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        if not k:
            raise ParameterError(f"--set expects NAME=VALUE, got {item!r}")
        if k in out:
            raise ParameterError(f"parameter '{k}' is set twice")
        out[k] = v.strip()
    return out
