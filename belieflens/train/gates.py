"""Pre-registered teaching gates: a gate file, frozen in git before its data is first read,
that says which models are read on which held-out conditions, and what each must meet.

A gate file (TOML) names the environment, the belief question, the gate episodes' seed, the
models (each taught adapter with the SHA-256 of its weights, so that the adapter read is the
one frozen), the conditions (parameters, or a grid of them, and episodes) and the checks::

    name = "coin-flip teaching gates"
    env = "coin-flip"
    probe = "next-flip"
    seed = 7001
    params = { probes = "next-flip" }

    [models.base]
    model = "smollm2-135m"
    [models."S=1"]
    model = "smollm2-135m-bayes"
    strength = 1.0
    weights_sha256 = "..."

    [conditions.new-sides]
    params = { sides = "random", words = "b", turns = 10 }
    episodes = 24

    [[gate]]
    model = "S=1"
    conditions = ["new-sides"]
    slope = ">= 0.8"
    tvd_oracle = "<= 0.05"

    [[report]]
    model = "base"
    conditions = "all"
    slope = "< 0.3"

A ``[[gate]]`` must be met; a ``[[report]]`` is printed beside it and decides nothing. Each
check compares one measure of :func:`belieflens.analysis.updating.updating` (``slope``,
``slope_lo``, ``slope_hi``, ``tvd_oracle``, ``tvd_target``, ``step_r2``) in each named
condition and delivery (``deliveries``, default both); ``apart_from = "LABEL"`` asks that
the model's 95% slope interval and that model's do not overlap. Parameter set ``j`` of a
condition (a grid's points in order) draws its episodes at ``seed + j``.

:func:`frozen_at` finds the commit that froze a gate file and refuses one edited since;
:func:`verdicts` reads the measures against the checks.
"""

from __future__ import annotations

import itertools
import operator
import os
import subprocess
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.errors import ParameterError

MEASURES: tuple[str, ...] = ("slope", "slope_lo", "slope_hi", "tvd_oracle", "tvd_target",
                             "step_r2")
"""The measures a check may compare (:func:`belieflens.analysis.updating.updating`)."""

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}

DELIVERIES: tuple[str, ...] = ("single-turn", "multi-turn")

MODEL = "model"
CONDITION = "condition"
"""The dims a gate run adds to the measures: each model, each condition."""


@dataclass(frozen=True)
class ModelEntry:
    """A model a gate file reads: its label, spec, the evidence weight it was taught (its target
    is the posterior so weighted; 1: the oracle) and, for an adapter, its weights' SHA-256."""

    label: str
    model: str
    strength: float = 1.0
    weights_sha256: str = ""


@dataclass(frozen=True)
class ConditionEntry:
    """A held-out condition: its parameter sets (over the file's ``params``) and the episodes
    of each."""

    name: str
    param_sets: tuple[dict[str, Any], ...]
    episodes: int


@dataclass(frozen=True)
class Check:
    """One comparison: ``measure op threshold`` for ``model`` in each condition and delivery;
    ``measure == "apart"``: its slope interval and ``other``'s do not overlap."""

    model: str
    conditions: tuple[str, ...]
    deliveries: tuple[str, ...]
    measure: str
    op: str = ""
    threshold: float = float("nan")
    other: str = ""
    gated: bool = True

    def describe(self) -> str:
        """The check as the gate file states it."""
        if self.measure == "apart":
            return f"95% slope interval apart from {self.other}'s"
        return f"{self.measure} {self.op} {self.threshold:g}"


@dataclass(frozen=True)
class GateFile:
    """A parsed gate file."""

    path: Path
    name: str
    env: str
    probe: str
    seed: int
    params: dict[str, Any]
    models: dict[str, ModelEntry]
    conditions: dict[str, ConditionEntry]
    checks: tuple[Check, ...]

    def episodes_of(self, condition: str) -> list[tuple[dict[str, Any], int, int]]:
        """``(parameters, seed, episodes)`` of each parameter set of ``condition``."""
        c = self.conditions[condition]
        return [({**self.params, **p}, self.seed + j, c.episodes)
                for j, p in enumerate(c.param_sets)]


def _bad(path: Path, what: str) -> ParameterError:
    return ParameterError(f"gate file {path}: {what}")


def _table(raw: Mapping[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise _bad(path, f"'{key}' must be a table")
    return value


def _condition(path: Path, name: str, raw: Any) -> ConditionEntry:
    if not isinstance(raw, dict):
        raise _bad(path, f"condition {name!r} must be a table")
    grid, params = raw.get("grid"), raw.get("params", {})
    if grid is not None:
        if not isinstance(grid, dict) or not all(isinstance(v, list) and v
                                                 for v in grid.values()):
            raise _bad(path, f"condition {name!r}: 'grid' maps parameters to non-empty lists")
        sets = tuple({**params, **dict(zip(grid, point, strict=True))}
                     for point in itertools.product(*grid.values()))
    else:
        sets = (dict(params),)
    episodes = raw.get("episodes")
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise _bad(path, f"condition {name!r}: 'episodes' must be an integer >= 1")
    return ConditionEntry(name, sets, episodes)


def _checks(path: Path, raw: Any, models: Mapping[str, ModelEntry],
            conditions: Mapping[str, ConditionEntry], gated: bool) -> list[Check]:
    if not isinstance(raw, list):
        raise _bad(path, f"'{'gate' if gated else 'report'}' must be a list of tables")
    out = []
    for entry in raw:
        model = entry.get("model")
        if model not in models:
            raise _bad(path, f"a check names model {model!r}: the file's models are "
                       + ", ".join(models))
        names = entry.get("conditions", [])
        names = list(conditions) if names == "all" else list(names)
        unknown = [c for c in names if c not in conditions]
        if not names or unknown:
            raise _bad(path, f"a check of {model} names no condition or an unknown one "
                       f"({', '.join(map(str, unknown)) or 'none'})")
        deliveries = tuple(entry.get("deliveries", DELIVERIES))
        base = {"model": model, "conditions": tuple(names), "deliveries": deliveries,
                "gated": gated}
        for key, value in entry.items():
            if key in ("model", "conditions", "deliveries"):
                continue
            if key == "apart_from":
                if value not in models:
                    raise _bad(path, f"apart_from names model {value!r}, not in the file")
                out.append(Check(measure="apart", other=str(value), **base))
                continue
            out.append(Check(measure=key, **base, **_comparison(path, key, value)))
    return out


def _comparison(path: Path, key: str, value: Any) -> dict[str, Any]:
    if key not in MEASURES:
        raise _bad(path, f"unknown measure {key!r}: choose from " + ", ".join(MEASURES))
    text = str(value).strip()
    for op in sorted(OPS, key=len, reverse=True):
        if text.startswith(op):
            try:
                return {"op": op, "threshold": float(text[len(op):])}
            except ValueError:
                break
    raise _bad(path, f"{key} = {value!r}: write an operator (>=, <=, >, <) and a number")


def load_gate_file(path: str | os.PathLike[str]) -> GateFile:
    """Parse and check a gate file; any defect is one line (:class:`ParameterError`)."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise _bad(p, f"cannot be read ({e.strerror or e})") from None
    except tomllib.TOMLDecodeError as e:
        raise _bad(p, f"is not TOML ({e})") from None
    for key in ("name", "env", "probe", "seed"):
        if key not in raw:
            raise _bad(p, f"'{key}' is missing")
    models = {label: ModelEntry(label, str(m.get("model", "")), float(m.get("strength", 1.0)),
                                str(m.get("weights_sha256", "")))
              for label, m in _table(raw, "models", p).items()}
    if not models or not all(m.model for m in models.values()):
        raise _bad(p, "every [models.LABEL] needs a 'model'")
    conditions = {n: _condition(p, n, c) for n, c in _table(raw, "conditions", p).items()}
    if not conditions:
        raise _bad(p, "it names no [conditions.NAME]")
    checks = (_checks(p, raw.get("gate", []), models, conditions, True)
              + _checks(p, raw.get("report", []), models, conditions, False))
    return GateFile(p, str(raw["name"]), str(raw["env"]), str(raw["probe"]), int(raw["seed"]),
                    dict(_table(raw, "params", p)), models, conditions, tuple(checks))


def _git(path: Path, *args: str) -> str:
    """``git -C <path's folder> args``'s output ("" where git fails, e.g. no commit yet)."""
    try:
        done = subprocess.run(["git", "-C", str(path.parent), *args], capture_output=True,
                              text=True, check=False)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def frozen_at(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(commit, date)`` of the commit that froze the gate file (the one that added it); one
    line if it is not in a git repository, not committed, or edited since (in a later commit
    or uncommitted)."""
    p = Path(path).resolve()
    if _git(p, "rev-parse", "--is-inside-work-tree") != "true":
        raise ParameterError(f"gate file {path}: not in a git repository, so its freeze "
                             "cannot be checked")
    history = _git(p, "log", "--format=%H %cs", "--", p.name).splitlines()
    if not history:
        raise ParameterError(f"gate file {path} is not committed: commit it before its gates "
                             "are first run (the commit freezes them)")
    commit, date = history[-1].split()
    if len(history) > 1 or _git(p, "status", "--porcelain", "--", p.name):
        raise ParameterError(f"gate file {path} was edited after its freeze commit "
                             f"{commit[:12]}: a changed gate needs new gate seeds in a new file")
    return commit, date


def stack(rows: Sequence[xr.Dataset]) -> xr.Dataset:
    """Measures of single ``(model, condition)`` pairs as one Dataset over both dims (turns
    padded with NaN where conditions differ in length)."""
    out = xr.combine_by_coords(list(rows), data_vars="minimal", coords="minimal",
                               compat="override", join="outer", combine_attrs="drop")
    assert isinstance(out, xr.Dataset)
    return out


@dataclass(frozen=True)
class Verdict:
    """One check in one condition and delivery: its value, and whether it is met."""

    check: Check
    condition: str
    delivery: str
    value: str
    met: bool


def _value(measures: xr.Dataset, model: str, condition: str, delivery: str,
           name: str) -> float:
    return float(measures[name].sel({MODEL: model, CONDITION: condition, "delivery": delivery}))


def verdicts(measures: xr.Dataset, checks: Sequence[Check]) -> list[Verdict]:
    """Every check in each of its conditions and deliveries, read off ``measures`` (dims
    ``model``, ``condition``, ``delivery``; a NaN is never met)."""
    out = []
    for c in checks:
        for cond, d in itertools.product(c.conditions, c.deliveries):
            lo, hi = (_value(measures, c.model, cond, d, k) for k in ("slope_lo", "slope_hi"))
            if c.measure == "apart":
                olo, ohi = (_value(measures, c.other, cond, d, k)
                            for k in ("slope_lo", "slope_hi"))
                met = bool(hi < olo or ohi < lo)
                text = f"[{lo:.3f}, {hi:.3f}] vs [{olo:.3f}, {ohi:.3f}]"
            else:
                v = _value(measures, c.model, cond, d, c.measure)
                met = bool(np.isfinite(v) and OPS[c.op](v, c.threshold))
                text = f"{v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if c.measure == "slope" else "")
            out.append(Verdict(c, cond, d, text, met))
    return out


def all_met(found: Sequence[Verdict]) -> bool:
    """Whether every gated check is met (reported ones decide nothing)."""
    return all(v.met for v in found if v.check.gated)
