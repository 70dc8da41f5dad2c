"""The record of the known pairs' power, which the reports' marks read.

``belieflens power --record`` (:func:`belieflens.power`) keeps what each test found on each
known pair (:mod:`belieflens.analysis.power`) in a JSON file, shipped as package data
(:func:`record_path`; a later run replaces the pairs it ran and keeps the others):

```text
{"about": "...", "level": 0.95, "correction": "max-T over layers: ...",
 "pairs": {PAIR: {"kind": "taught-base" | "trained-untrained", "env": ENV,
                  "models": "toy" | "language model", "positive": ..., "references": ...,
                  "episodes": N, "left_out": K, "command": ..., "commit": ..., "date": ...,
                  "tests": {TEST: {"family": "decoder" | "intervention", "power": BOOL,
                                   "layers": [separating layers], "best_layer": L,
                                   "separation": X, "low": X, "high": X,
                                   "reversed": BOOL}}}}}
```

A study's **kind** is its environment and whether its network is a toy or a language model
(:func:`study_kind`). A test has **shown power** for a study where it separated at least one
known pair of the study's kind; otherwise the reports, ``compare`` and the viewer write
:data:`MARK` beside its result (:func:`marks_for`), with the reason: no known pair of that
kind was run through it, or the pairs it was run on it did not separate.

Examples:
    >>> rec = {"pairs": {"toy": {"env": "rrxor", "models": "toy", "tests": {
    ...     "decoder": {"power": True, "layers": [2, 3]},
    ...     "logit-lens": {"power": False, "layers": []}}}}}
    >>> marks = marks_for({"env_name": "rrxor", "model_source": "toy"}, rec)
    >>> marks.mark("decoder"), marks.mark("logit-lens"), marks.mark("steer")
    ('', 'no shown power', 'no shown power')
    >>> marks.note("logit-lens")
    'no shown power: not separated on toy'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.power import PAIR, PAIR_COORDS, TEST

MARK = "no shown power"
"""What a report writes beside a test that has not shown power on a pair of its study's kind."""

Record = Mapping[str, Any]
"""A power record as its JSON reads (module docstring)."""

ABOUT = ("Each internal test on known pairs (a taught adapter beside its base on a held-out "
         "study; a trained toy beside untrained networks of its shape): whether it separates "
         "them at some layer with a 95% interval corrected across layers. Written by "
         "`belieflens power --record`; the reports mark a test without power on a pair of "
         "a study's kind.")


def record_path() -> Path:
    """The shipped record: ``belieflens/data/power/record.json`` (``$BELIEFLENS_POWER_RECORD``
    moves it)."""
    given = os.environ.get("BELIEFLENS_POWER_RECORD", "").strip()
    if given:
        return Path(given)
    return Path(str(resources.files("belieflens") / "data" / "power" / "record.json"))


def load_record(path: str | os.PathLike[str] | None = None) -> Record:
    """The record at ``path`` (default :func:`record_path`); an empty one where there is
    none."""
    p = Path(path) if path is not None else record_path()
    if not p.is_file():
        return {"pairs": {}}
    raw = json.loads(p.read_text(encoding="utf-8"))
    return raw if isinstance(raw, dict) else {"pairs": {}}


def _num(x: Any) -> float | None:
    v = float(x)
    return round(v, 6) if np.isfinite(v) else None


def _test_entry(s: xr.Dataset) -> dict[str, Any]:
    """One (test, pair) of the power Dataset as the record keeps it."""
    best = int(s["best_layer"])
    at = s.sel(layer=best) if best >= 0 else None
    return {"family": str(s["family"].values), "power": bool(s["power"]),
            "layers": [int(x) for x in s["layer"].values[np.asarray(s["separates"].values)]],
            "best_layer": best,
            "separation": _num(at["separation"]) if at is not None else None,
            "low": _num(at["separation_low"]) if at is not None else None,
            "high": _num(at["separation_high"]) if at is not None else None,
            "reversed": bool(s["reversed"])}


def record_of(ds: xr.Dataset, header: Mapping[str, str]) -> dict[str, Any]:
    """The record of a power Dataset (:func:`belieflens.analysis.power.power_dataset`):
    every pair with the tests that could read it; ``header`` (command, commit, date) is kept
    with each pair."""
    pairs: dict[str, Any] = {}
    for p in ds[PAIR].values:
        one = ds.sel({PAIR: p})
        tests = {str(t): _test_entry(one.sel({TEST: t})) for t in ds[TEST].values
                 if bool(one["read"].sel({TEST: t}))}
        pairs[str(p)] = {
            **{field_: (int(one[name].values) if field_ in ("episodes", "left_out",
                                                           "n_layers")
                        else str(one[name].values))
               for name, field_ in PAIR_COORDS.items()},
            **dict(header), "tests": tests}
    return {"about": ABOUT, "level": float(ds.attrs["level"]),
            "correction": str(ds.attrs["correction"]), "pairs": pairs}


def merge(old: Record, new: Record) -> dict[str, Any]:
    """``new`` over ``old``: its pairs replace those of the same name, the others are kept."""
    return {**dict(old), **{k: v for k, v in new.items() if k != "pairs"},
            "pairs": {**dict(old.get("pairs", {})), **dict(new.get("pairs", {}))}}


def save_record(record: Record, path: str | os.PathLike[str] | None = None) -> Path:
    """Write ``record`` to ``path`` (default :func:`record_path`), replaced whole."""
    p = Path(path) if path is not None else record_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(p)
    return p


def study_kind(attrs: Mapping[str, Any]) -> tuple[str, str]:
    """A study's kind: its environment and ``toy`` or ``language model``."""
    source = attrs.get("model_source", "")
    if isinstance(source, np.ndarray):
        source = source.reshape(-1)[0] if source.size else ""
    return str(attrs.get("env_name", "")), "toy" if str(source) == "toy" else "language model"


@dataclass(frozen=True)
class Marks:
    """What the record says of each test for one kind of study: the known pairs of that kind
    each test was run on, and those it separated."""

    kind: tuple[str, str]
    tried: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    shown: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def has_power(self, test: str) -> bool:
        """Whether ``test`` separated a known pair of this kind."""
        return bool(self.shown.get(test))

    def mark(self, test: str) -> str:
        """:data:`MARK`, or ``''`` for a test with shown power."""
        return "" if self.has_power(test) else MARK

    def note(self, test: str) -> str:
        """The mark with its reason, or where the test showed power."""
        if self.has_power(test):
            return f"shown power on {', '.join(self.shown[test])}"
        tried = self.tried.get(test, ())
        if not tried:
            env, models = self.kind
            return f"{MARK}: no known pair of its kind ({models}, {env}) was run through it"
        return f"{MARK}: not separated on {', '.join(tried)}"

    def beside(self, test: str) -> str:
        """`` (no shown power)`` to append to a result's name, or ``''``."""
        return f" ({MARK})" if not self.has_power(test) else ""


def marks_for(attrs: Mapping[str, Any], record: Record | None = None) -> Marks:
    """The :class:`Marks` of a study with root attributes ``attrs`` (its kind:
    :func:`study_kind`) from ``record`` (default: the shipped one)."""
    rec = load_record() if record is None else record
    kind = study_kind(attrs)
    tried: dict[str, list[str]] = {}
    shown: dict[str, list[str]] = {}
    for name, pair in dict(rec.get("pairs", {})).items():
        if (str(pair.get("env", "")), str(pair.get("models", ""))) != kind:
            continue
        for test, entry in dict(pair.get("tests", {})).items():
            tried.setdefault(test, []).append(name)
            if entry.get("power"):
                shown.setdefault(test, []).append(name)
    return Marks(kind, {k: tuple(v) for k, v in tried.items()},
                 {k: tuple(v) for k, v in shown.items()})
