"""Case sets: the shipped ones, our own JSON format, and BayesBench storyboard directories.

Our format (``belieflens/data/<task>/cases.json``) is one file
``{"cases": [{"id", "label", "title", "segments": [{"id", "category", "content"}],
...optional text fields}]}``. BayesBench's is one file per case in a directory:
social judgment with ``id``, ``verdict``, ``title``, ``storyboard``; triage with
``case_id``, ``true_urgency``, ``specialty``, ``self_diagnosis``, ``storyboard``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from belieflens.envs.judgment.case import Case, Kind, Segment, labels_of
from belieflens.episodes import importing as io

DATA_DIR: dict[Kind, str] = {"social": "social_judgment", "triage": "medical_triage"}
"""Package-data folder of each task's shipped case set."""

_BAYESBENCH_FIELDS: dict[Kind, tuple[str, str, tuple[str, ...]]] = {
    "social": ("id", "verdict", ("title",)),
    "triage": ("case_id", "true_urgency", ("specialty", "self_diagnosis")),
}


def _segments(raw: Any, path: Path | str, field: str) -> tuple[Segment, ...]:
    items = io.as_list(raw, path, field, min_len=1)
    out = []
    for j, seg in enumerate(items):
        f = f"{field}[{j}]"
        out.append(
            Segment(
                id=str(io.get(seg, "id", path, f)),
                category=str(seg.get("category", "")),
                content=io.as_str(io.get(seg, "content", path, f), path, f"{f}.content").strip(),
            )
        )
    return tuple(out)


def _label(raw: Any, kind: Kind, path: Path | str, field: str) -> str:
    label = io.as_str(raw, path, field)
    allowed = labels_of(kind)
    if label not in allowed:
        raise io.fail(path, field, f"{label!r} is not one of {', '.join(allowed)}")
    return label


def _case_id(raw: Any, path: Path | str, field: str) -> str:
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or str(raw).strip() == "":
        raise io.fail(path, field, "expected a non-empty string or integer id")
    return str(raw)


def parse_own(raw: Any, kind: Kind, path: Path | str) -> tuple[Case, ...]:
    """Cases from our own JSON format (already parsed)."""
    items = io.as_list(io.get(raw, "cases", path, ""), path, "cases", min_len=1)
    out = []
    for i, c in enumerate(items):
        f = f"cases[{i}]"
        meta = {
            k: io.as_str(v, path, f"{f}.{k}")
            for k, v in (c.items() if isinstance(c, dict) else [])
            if k not in ("id", "label", "title", "segments")
        }
        out.append(
            Case(
                id=_case_id(io.get(c, "id", path, f), path, f"{f}.id"),
                label=_label(io.get(c, "label", path, f), kind, path, f"{f}.label"),
                segments=_segments(io.get(c, "segments", path, f), path, f"{f}.segments"),
                title=str(c.get("title", "")),
                meta=meta,
            )
        )
    _unique(out, path)
    return tuple(out)


def parse_bayesbench(raw: Any, kind: Kind, path: Path | str) -> Case:
    """One case from a BayesBench storyboard file (already parsed)."""
    id_key, label_key, extra = _BAYESBENCH_FIELDS[kind]
    case_id = _case_id(io.get(raw, id_key, path, ""), path, id_key)
    label = _label(io.get(raw, label_key, path, ""), kind, path, label_key)
    meta = {k: str(raw[k]) for k in extra if isinstance(raw.get(k), str)}
    return Case(
        id=case_id,
        label=label,
        segments=_segments(io.get(raw, "storyboard", path, ""), path, "storyboard"),
        title=meta.pop("title", ""),
        meta=meta,
    )


def load_builtin(kind: Kind) -> tuple[Case, ...]:
    """The case set shipped with the package for ``kind``."""
    res = resources.files("belieflens") / "data" / DATA_DIR[kind] / "cases.json"
    name = f"belieflens/data/{DATA_DIR[kind]}/cases.json"
    return parse_own(json.loads(res.read_text(encoding="utf-8")), kind, name)


def load_bayesbench(directory: Path | str, kind: Kind) -> tuple[Case, ...]:
    """All ``*.json`` storyboards in ``directory``, sorted by file name."""
    root = Path(directory)
    files = sorted(root.glob("*.json"))
    if not files:
        raise io.fail(root, "", "no *.json storyboard files in this directory")
    cases = [parse_bayesbench(io.read_json(p), kind, p) for p in files]
    _unique(cases, root)
    return tuple(cases)


def load(source: str, kind: Kind) -> tuple[Case, ...]:
    """``builtin``, a directory of BayesBench storyboards, or one JSON file in our format."""
    if source == "builtin":
        return load_builtin(kind)
    path = Path(source)
    if path.is_dir():
        return load_bayesbench(path, kind)
    return parse_own(io.read_json(path), kind, path)


def _unique(cases: list[Case], path: Path | str) -> None:
    seen: set[str] = set()
    for c in cases:
        if c.id in seen:
            raise io.fail(path, "id", f"case id {c.id!r} appears twice")
        seen.add(c.id)
