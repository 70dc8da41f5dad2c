"""Case sets: the shipped ones, and BayesBench storyboard imports (valid and malformed)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from belieflens.envs.judgment.case import SOCIAL_LABELS, TRIAGE_LABELS, Kind
from belieflens.envs.judgment.cases import load, load_bayesbench, load_builtin
from belieflens.errors import ImportFormatError

PEERS = Path(__file__).resolve().parents[3].parent / "shared" / "peers" / "bayesbench"
DIRS: dict[Kind, Path] = {
    "social": PEERS / "social_judgment_storyboards",
    "triage": PEERS / "medical_triage_storyboards",
}
needs_peers = pytest.mark.skipif(not PEERS.is_dir(), reason="peer data ../shared not present")


@pytest.mark.parametrize(("kind", "labels"), [("social", SOCIAL_LABELS), ("triage", TRIAGE_LABELS)])
def test_builtin_sets_are_balanced_and_clean(kind: Kind, labels: tuple[str, ...]) -> None:
    cases = load_builtin(kind)
    assert len(cases) >= 12
    counts = Counter(c.label for c in cases)
    assert set(counts) == set(labels) and len(set(counts.values())) == 1
    assert len({c.id for c in cases}) == len(cases)
    for c in cases:
        assert len(c.segments) >= 4
        assert all(s.content and "<" not in s.content for s in c.segments)
    if kind == "triage":
        assert all(c.meta.get("self_diagnosis") for c in cases)


@needs_peers
@pytest.mark.parametrize("kind", ["social", "triage"])
def test_builtin_text_is_not_copied_from_peers(kind: Kind) -> None:
    peer = {s.content for c in load_bayesbench(DIRS[kind], kind) for s in c.segments}
    ours = {s.content for c in load_builtin(kind) for s in c.segments}
    assert not peer & ours


@needs_peers
def test_bayesbench_social_import() -> None:
    cases = load(str(DIRS["social"]), "social")
    assert len(cases) == 100
    one = next(c for c in cases if c.id == "9zjzfm")
    raw = json.loads((DIRS["social"] / "9zjzfm.json").read_text())
    assert one.label == raw["verdict"] and one.title == raw["title"]
    assert [s.content for s in one.segments] == [s["content"] for s in raw["storyboard"]]
    assert Counter(c.label for c in cases) == Counter({"NTA": 86, "YTA": 14})


@needs_peers
def test_bayesbench_triage_import() -> None:
    cases = load(str(DIRS["triage"]), "triage")
    assert len(cases) == 100
    one = next(c for c in cases if c.id == "1016")
    assert one.label == "Observation"
    assert one.meta == {
        "specialty": "Gastroenterology",
        "self_diagnosis": "Irritable bowel syndrome",
    }
    assert one.segments[0].category == "CHIEF_COMPLAINT" and len(one.segments) == 8
    assert set(Counter(c.label for c in cases).values()) == {25}


def _storyboard(tmp_path: Path, kind: Kind, edit: Any) -> Path:
    src = DIRS[kind]
    name = "9zjzfm.json" if kind == "social" else "1016.json"
    shutil.copy(src / name, tmp_path / name)
    data = json.loads((tmp_path / name).read_text())
    edit(data)
    (tmp_path / name).write_text(json.dumps(data))
    return tmp_path / name


@needs_peers
@pytest.mark.parametrize(
    ("kind", "edit", "field"),
    [
        ("social", lambda d: d.pop("verdict"), "'verdict'"),
        ("social", lambda d: d.__setitem__("verdict", "ESH"), "'verdict'"),
        ("social", lambda d: d.__setitem__("storyboard", []), "'storyboard'"),
        (
            "social",
            lambda d: d["storyboard"][1].__setitem__("content", 7),
            "'storyboard[1].content'",
        ),
        ("social", lambda d: d["storyboard"][2].pop("id"), "'storyboard[2].id'"),
        ("triage", lambda d: d.pop("case_id"), "'case_id'"),
        ("triage", lambda d: d.__setitem__("true_urgency", "Soon"), "'true_urgency'"),
        ("triage", lambda d: d.__setitem__("storyboard", {"a": 1}), "'storyboard'"),
    ],
)
def test_malformed_storyboards_fail_with_one_line(
    tmp_path: Path, kind: Kind, edit: Any, field: str
) -> None:
    path = _storyboard(tmp_path, kind, edit)
    with pytest.raises(ImportFormatError) as info:
        load(str(tmp_path), kind)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and field in msg


def test_invalid_json_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"no \*\.json"):
        load(str(tmp_path), "social")
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(ImportFormatError, match=r"x\.json: not valid JSON"):
        load(str(tmp_path), "social")


def test_own_format_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    case = {"id": "c1", "label": "Urgent", "segments": [{"id": "a1", "content": "It hurts."}]}
    path.write_text(json.dumps({"cases": [case, {**case}]}))
    with pytest.raises(ImportFormatError, match="appears twice"):
        load(str(path), "triage")
    path.write_text(json.dumps({"cases": [case]}))
    (one,) = load(str(path), "triage")
    assert one.label == "Urgent" and one.segments[0].content == "It hurts."
    path.write_text(json.dumps({"cases": [{**case, "label": "YTA"}]}))
    with pytest.raises(ImportFormatError, match=r"cases\[0\]\.label"):
        load(str(path), "triage")
