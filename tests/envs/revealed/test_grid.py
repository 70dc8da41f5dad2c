"""Shared grid machinery: episode order, sampling, determinism, truth, rendering."""

from __future__ import annotations

import math
from typing import Any

import pytest

from belieflens.envs import Environment, get, names
from belieflens.readouts.render import render

ENVS = ["dice", "coins", "preference", "choice", "case-study"]


class CharTokenizer:
    """One token per character: a tokenizer-free stand-in for alignment checks."""

    chat_template = "<fake>"
    bos_token_id = None

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool,
                            add_generation_prompt: bool) -> str:
        text = "".join(f"<{m['role']}>{m['content']}</>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def decode(ids: tuple[int, ...]) -> str:
    return "".join(chr(i) for i in ids)


def test_registered() -> None:
    assert set(ENVS) <= set(names())
    for name in ENVS:
        assert isinstance(get(name), Environment)


@pytest.mark.parametrize("name", ENVS)
def test_episodes_are_deterministic_and_shaped(name: str) -> None:
    env = get(name, stated="first")
    a = list(env.episodes(7, 3))
    assert a == list(env.episodes(7, 3))
    assert [e.index for e in a] == list(range(min(7, env.count())))  # type: ignore[attr-defined]
    assert [e.truth["grid_index"] for e in a] == [float(i) for i in range(len(a))]
    for e in a:
        assert len(e.turns) == 1 and e.turns[0].index == 0
        revealed, stated = e.turns[0].probes
        assert (revealed.name, revealed.kind) == ("revealed", "completion")
        assert len(revealed.queries) == 1
        assert (stated.name, stated.kind, len(stated.queries)) == ("stated", "mcq", 5)
        assert stated.oracle is None and revealed.oracle is not None
        assert sum(revealed.oracle) == pytest.approx(1.0)
        assert all(isinstance(v, (str, float)) for v in e.truth.values())
        assert revealed.labels[revealed.labels.index(str(e.truth["target"]))]
    keys = {frozenset(e.truth) for e in env.episodes(10_000, 0)}
    assert len(keys) == 1  # same coordinates for every grid point


@pytest.mark.parametrize("name", ENVS)
def test_items_share_their_grid_point(name: str) -> None:
    """Under stated=every, item 0 of a grid point holds both probes, the others one stated."""
    env = get(name)
    eps = list(env.episodes(40, 0))
    for e in eps:
        q = int(e.truth["asked_index"])
        probes = e.turns[0].probes
        assert [p.name for p in probes] == (["revealed", "stated"] if q == 0 else ["stated"])
        assert e.truth["has_revealed"] == float(q == 0)
    firsts = [e for e in eps if e.truth["asked_index"] == 0]
    assert [e.truth["grid_index"] for e in firsts] == [float(i) for i in range(len(firsts))]


@pytest.mark.parametrize("name", ENVS)
def test_count_caps_episodes(name: str) -> None:
    env = get(name)
    assert len(list(env.episodes(100_000, 0))) == env.count()  # type: ignore[attr-defined]
    assert list(env.episodes(0, 0)) == []


def test_distractors_depend_on_seed_not_on_selection() -> None:
    kw = {"dice": 2, "style": "belieflens", "stated": "first"}
    env = get("dice", **kw)
    a = {e.truth["grid_index"]: e.turns[0].probes[1].labels for e in env.episodes(50, 1)}
    b = {e.truth["grid_index"]: e.turns[0].probes[1].labels
         for e in get("dice", sample=True, **kw).episodes(50, 1)}
    c = {e.truth["grid_index"]: e.turns[0].probes[1].labels for e in env.episodes(50, 2)}
    assert all(a[g] == labels for g, labels in b.items() if g in a)
    assert sum(a[g] != c[g] for g in a) > 40


def test_sample_is_a_seeded_permutation() -> None:
    env = get("coins", sample=True, stated="first")
    a = [e.truth["grid_index"] for e in env.episodes(20, 5)]
    assert a == [e.truth["grid_index"] for e in env.episodes(20, 5)]
    assert a != [e.truth["grid_index"] for e in env.episodes(20, 6)]
    assert len(set(a)) == 20 and a != sorted(a)
    full = [e.truth["grid_index"] for e in env.episodes(10_000, 5)]
    assert sorted(full) == [float(i) for i in range(env.count())]  # type: ignore[attr-defined]


@pytest.mark.parametrize("fmt", ["raw", "chat"])
@pytest.mark.parametrize("name", ENVS)
def test_rendering_aligns_every_query(name: str, fmt: str) -> None:
    tok: Any = CharTokenizer()
    for style in ("paper", "belieflens"):
        _check_rendering(tok, name, fmt, style)


def _check_rendering(tok: Any, name: str, fmt: str, style: str) -> None:
    for e in get(name, format=fmt, sample=True, style=style, stated="first").episodes(25, 0):
        revealed, stated = e.turns[0].probes
        for probe in (revealed, stated):
            for q in probe.queries:
                # the paper asks its MCQs through the chat template (Sec. 3.3)
                assert q.format == ("chat" if probe is stated and style == "paper" else fmt)
                t = render(tok, q)
                conts = [decode(c) for c in t.option_ids]
                assert all(conts) and len(set(conts)) == len(conts)
                if probe is stated and style == "paper":
                    assert decode(t.context_ids).endswith("<assistant>[[")
                    assert conts == [f"{x}]]" for x in "ABCDE"]
                elif probe is stated:
                    assert decode(t.context_ids).endswith("Answer: [[")
                    assert conts == [f"{x}]]" for x in "ABCDE"]
        t = render(tok, revealed.queries[0])
        labels = revealed.labels
        ambiguous = any(a != b and b.startswith(a) for a in labels for b in labels)
        expected = [f"{lab}." if ambiguous else lab for lab in labels]
        assert [decode(c) for c in t.option_ids] == expected
        assert decode(t.context_ids) == t.context_text + " "  # the shared space moved in
        if fmt == "chat":
            assert t.context_text.startswith(("<user>", "<system>"))
            assert revealed.queries[0].messages[0].content in t.context_text


def test_dice_raw_completion_text() -> None:
    (e,) = get("dice", dice=1, faces=12, variant="single", style="belieflens").episodes(1, 0)
    t = render(CharTokenizer(), e.turns[0].probes[0].queries[0])
    assert decode(t.context_ids) == ("I roll a fair 12-sided die with faces numbered 1 to 12. "
                              "The result is ")
    assert decode(t.option_ids[0]) == "1." and decode(t.option_ids[11]) == "12."


def test_truth_has_nan_only_for_absent_numbers() -> None:
    (e,) = get("coins", coins=2, focus="Tails", bias=5, variant="regular").episodes(1, 0)
    assert math.isnan(float(e.truth["previous"]))
    assert e.truth["focus"] == "Tails" and e.truth["bias"] == 5.0


@pytest.mark.parametrize(("name", "params"), [(n, {}) for n in ENVS]
                         + [("dice", {"support": "posterior"}), ("case-study", {"case": "clinic"})])
def test_every_revealed_prompt_renders(name: str, params: dict[str, str]) -> None:
    """Every grid point's revealed read-out has two or more non-empty continuations."""
    tok: Any = CharTokenizer()
    env = get(name, stated="first", **params)
    n = 0
    for e in env.episodes(100_000, 0):
        t = render(tok, e.turns[0].probes[0].queries[0])
        assert len(t.option_ids) >= 2 and all(t.option_ids)
        n += 1
    assert n == env.prompt_counts().revealed  # type: ignore[attr-defined]
