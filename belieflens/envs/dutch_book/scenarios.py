"""Dutch-book scenario sets: the shipped set and user JSON files.

A scenario set is JSON of the form::

    {"scenarios": [
        {"id": "norm-rain", "kind": "normalisation",
         "questions": ["Will it rain ...?", "Will it stay dry ...?"]},
        {"id": "mono-temp", "kind": "monotonicity",
         "questions": ["Will ... exceed 40 C?", ..., "Will ... exceed 30 C?"]},
        {"id": "ext-bank", "kind": "extensionality",
         "questions": ["Will the bank cut rates ...?", "Will the bank lower rates ...?"]}
    ]}

- ``normalisation``: exactly two questions, an event and its complement.
- ``monotonicity``: two or more questions on nested events listed from the
  smallest to the largest (``A1 ⊂ A2 ⊂ ...``), so coherent credences never decrease.
- ``extensionality``: two or more wordings of one event.

Optional per-scenario fields: ``"domain"`` (a string). Ids must be unique.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, get_args

from belieflens.episodes.importing import field_error, parse_items, read_json

ScenarioKind = Literal["normalisation", "monotonicity", "extensionality"]
"""The three kinds of Dutch-book scenario: complement pair, nested chain, two wordings."""

SCENARIO_KINDS: tuple[ScenarioKind, ...] = get_args(ScenarioKind)
"""All scenario kinds, in order."""

SHIPPED = "scenarios.json"
"""File name of the shipped scenario set under ``belieflens/data/dutch_book``."""


@dataclass(frozen=True)
class Scenario:
    """One set of related yes/no forecast questions.

    Attributes:
        id: a unique name within its set.
        kind: which coherence law the questions test.
        questions: the question texts, in the order the law refers to.
        domain: free-text topic, e.g. ``weather`` ("" when not given).
    """

    id: str
    kind: ScenarioKind
    questions: tuple[str, ...]
    domain: str = ""


def _kind(source: str, where: str, raw: object) -> ScenarioKind:
    for k in SCENARIO_KINDS:
        if raw == k:
            return k
    raise field_error(source, where, f"must be one of {', '.join(SCENARIO_KINDS)}, got {raw!r}")


def _scenario(source: str, i: int, raw: object) -> Scenario:
    where = f"scenarios[{i}]"
    if not isinstance(raw, dict):
        raise field_error(source, where, "must be an object")
    unknown = set(raw) - {"id", "kind", "questions", "domain"}
    if unknown:
        raise field_error(source, f"{where}.{sorted(unknown)[0]}", "is not a known field")
    sid = raw.get("id")
    if not isinstance(sid, str) or not sid.strip():
        raise field_error(source, f"{where}.id", "must be a non-empty string")
    kind = _kind(source, f"{where}.kind", raw.get("kind"))
    qs = raw.get("questions")
    if not isinstance(qs, list) or not all(isinstance(q, str) and q.strip() for q in qs):
        raise field_error(source, f"{where}.questions", "must be a list of non-empty strings")
    if kind == "normalisation" and len(qs) != 2:
        raise field_error(source, f"{where}.questions",
                          f"must hold exactly 2 questions, got {len(qs)}")
    if len(qs) < 2:
        raise field_error(source, f"{where}.questions",
                          f"must hold at least 2 questions, got {len(qs)}")
    if len(set(qs)) != len(qs):
        raise field_error(source, f"{where}.questions", "must not repeat a question")
    domain = raw.get("domain", "")
    if not isinstance(domain, str):
        raise field_error(source, f"{where}.domain", "must be a string")
    return Scenario(sid, kind, tuple(q.strip() for q in qs), domain)


def parse_scenarios(data: object, source: str) -> tuple[Scenario, ...]:
    """Validate decoded JSON as a scenario set; ``source`` names it in errors."""
    return parse_items(data, source, "scenarios", _scenario)


def load_scenarios(path: str | Path) -> tuple[Scenario, ...]:
    """Load a user scenario set; malformed content is one line (``ImportFormatError``)."""
    return parse_scenarios(read_json(Path(path)), str(path))


def shipped_scenarios() -> tuple[Scenario, ...]:
    """The scenario set shipped with belieflens (written for this project)."""
    ref = resources.files("belieflens").joinpath("data").joinpath("dutch_book").joinpath(SHIPPED)
    return parse_scenarios(json.loads(ref.read_text(encoding="utf-8")), f"belieflens:{SHIPPED}")
