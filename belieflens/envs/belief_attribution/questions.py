"""Factual question sets for belief attribution: the shipped sets and user JSON files.

A question set is JSON of the form::

    {"questions": [
        {"id": "geography-01", "domain": "geography",
         "question": "What is the capital of Australia?",
         "answer": "Canberra", "distractors": ["Sydney", "Melbourne"],
         "source": "written for belieflens"}
    ]}

Every item has exactly two distractors, distinct from the answer and from each other
(compared without case, accents or surrounding spaces); ``source`` (optional) names
where the fact comes from. Ids must be unique. Other top-level keys (a description,
the sources' licences) are allowed and ignored.

Two sets ship under ``belieflens/data/belief_attribution``: :data:`FACTS` (the default,
derived from public data packages by :mod:`.facts`) and :data:`SHIPPED` (105 questions
written for belieflens).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from belieflens.episodes.importing import field_error, parse_items, read_json

SHIPPED = "questions.json"
"""File name of the set written for belieflens under ``belieflens/data/belief_attribution``."""

FACTS = "facts.json"
"""File name of the real-fact set (:mod:`.facts`) under ``belieflens/data/belief_attribution``."""


@dataclass(frozen=True)
class FactQuestion:
    """A factual question with its correct answer and two plausible distractors.

    ``source`` names where the fact comes from (``""`` when the file does not say).
    """

    id: str
    domain: str
    question: str
    answer: str
    distractors: tuple[str, str]
    source: str = ""


def same_answer(a: str, b: str) -> bool:
    """Whether two answers are the same text up to case, accents and surrounding spaces."""

    def key(text: str) -> str:
        decomposed = unicodedata.normalize("NFKD", text.strip())
        return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()

    return key(a) == key(b)


def _text(source: str, where: str, raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise field_error(source, where, "must be a non-empty string")
    return raw.strip()


def _item(source: str, i: int, raw: object) -> FactQuestion:
    where = f"questions[{i}]"
    if not isinstance(raw, dict):
        raise field_error(source, where, "must be an object")
    unknown = set(raw) - {"id", "domain", "question", "answer", "distractors", "source"}
    if unknown:
        raise field_error(source, f"{where}.{sorted(unknown)[0]}", "is not a known field")
    qid = _text(source, f"{where}.id", raw.get("id"))
    domain = _text(source, f"{where}.domain", raw.get("domain"))
    question = _text(source, f"{where}.question", raw.get("question"))
    answer = _text(source, f"{where}.answer", raw.get("answer"))
    ds = raw.get("distractors")
    if not isinstance(ds, list) or len(ds) != 2:
        raise field_error(source, f"{where}.distractors", "must be a list of exactly 2 strings")
    d1 = _text(source, f"{where}.distractors[0]", ds[0])
    d2 = _text(source, f"{where}.distractors[1]", ds[1])
    for k, d in enumerate((d1, d2)):
        if same_answer(d, answer):
            raise field_error(source, f"{where}.distractors[{k}]",
                        f"equals the answer {answer!r} (a distractor must differ from it)")
    if same_answer(d1, d2):
        raise field_error(source, f"{where}.distractors", f"repeats {d1!r} (the two must differ)")
    origin = raw.get("source", "")
    if not isinstance(origin, str):
        raise field_error(source, f"{where}.source", "must be a string")
    return FactQuestion(qid, domain, question, answer, (d1, d2), origin.strip())


def parse_questions(data: object, source: str) -> tuple[FactQuestion, ...]:
    """Validate decoded JSON as a question set; ``source`` names it in errors."""
    return parse_items(data, source, "questions", _item)


def load_questions(path: str | Path) -> tuple[FactQuestion, ...]:
    """Load a user question set; malformed content is one line (``ImportFormatError``)."""
    return parse_questions(read_json(Path(path)), str(path))


def _packaged(name: str) -> tuple[FactQuestion, ...]:
    ref = resources.files("belieflens").joinpath("data").joinpath("belief_attribution")
    text = ref.joinpath(name).read_text(encoding="utf-8")
    return parse_questions(json.loads(text), f"belieflens:{name}")


def shipped_questions() -> tuple[FactQuestion, ...]:
    """The question set written for belieflens (105 items in 5 domains)."""
    return _packaged(SHIPPED)


@cache
def facts_questions() -> tuple[FactQuestion, ...]:
    """The real-fact set (the default): recall questions derived from public data packages
    by :mod:`.facts`, read from the shipped :data:`FACTS` (no source package needed)."""
    return _packaged(FACTS)
