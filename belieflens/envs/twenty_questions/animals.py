"""The secret animals of ``twenty-questions``: the paper's 40 (shipped), a count of them, named
ones, or a user's JSON file holding a list of names."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from belieflens.episodes.importing import fail, one_line, read_json
from belieflens.errors import ImportFormatError

SHIPPED = "animals.json"
"""The shipped list: the 40 animals of From Prompts to Posteriors, App. F.2.6, in its order."""


def parse_animals(data: object, source: str) -> tuple[str, ...]:
    """``data`` as a list of animal names: a non-empty JSON list of distinct non-empty strings
    (else one :class:`ImportFormatError` line naming ``source``)."""
    if not isinstance(data, list) or not data:
        raise fail(source, "", "must be a non-empty JSON list of animal names")
    names: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(data):
        if not isinstance(raw, str) or not raw.strip():
            raise fail(source, f"[{i}]", f"must be a non-empty string, got {raw!r}")
        name = raw.strip()
        if "\n" in name or "\r" in name:
            raise fail(source, f"[{i}]", "must be one line")
        if name.casefold() in seen:
            raise fail(source, f"[{i}]", f"repeats the animal {name!r}")
        seen.add(name.casefold())
        names.append(name)
    return tuple(names)


def load_animals(path: str | Path) -> tuple[str, ...]:
    """The animal names in a user's JSON file (a list of strings)."""
    return parse_animals(read_json(Path(path)), str(path))


def shipped_animals() -> tuple[str, ...]:
    """The paper's 40 animals (App. F.2.6), in the paper's order."""
    ref = resources.files("belieflens").joinpath("data").joinpath("twenty_questions")
    return parse_animals(read_json(Path(str(ref.joinpath(SHIPPED)))), SHIPPED)


def select_animals(spec: str) -> tuple[str, ...]:
    """The animals ``spec`` selects.

    - ``paper``: the paper's 40;
    - an integer ``N`` (1..40): the paper's first ``N``;
    - a path ending in ``.json``: that file's list of names;
    - otherwise comma-separated names, e.g. ``Zebra,Kiwi``.
    """
    text = spec.strip()
    if text == "paper":
        return shipped_animals()
    if text.isdigit():
        pool = shipped_animals()
        n = int(text)
        if not 1 <= n <= len(pool):
            raise ImportFormatError(
                f"animals = {text}: a count must be in 1..{len(pool)} (the paper's list)"
            )
        return pool[:n]
    if text.lower().endswith(".json"):
        return load_animals(text)
    return parse_animals([p for p in text.split(",")], one_line(f"animals={text!r}"))
