"""Dutch-book environment: shipped scenarios, user sets, deliveries and determinism."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from belieflens import envs
from belieflens.envs.dutch_book.env import LABELS, PLACEHOLDER_ANSWER, DutchBook, dialogue
from belieflens.envs.dutch_book.scenarios import load_scenarios, shipped_scenarios
from belieflens.episodes.base import Message
from belieflens.errors import ImportFormatError, ParameterError


def test_registered() -> None:
    assert "dutch-book" in envs.names()
    env = envs.get("dutch-book")
    assert isinstance(env, DutchBook)
    assert isinstance(env, envs.Environment)


def test_shipped_set_has_ten_of_each_kind() -> None:
    scenarios = shipped_scenarios()
    counts = Counter(s.kind for s in scenarios)
    assert min(counts[k] for k in ("normalisation", "monotonicity", "extensionality")) >= 10
    for s in scenarios:
        if s.kind == "monotonicity":
            assert len(s.questions) == 6
        else:
            assert len(s.questions) == 2
        assert all(q.endswith("?") for q in s.questions)


def test_episode_structure_and_deliveries() -> None:
    env = envs.get("dutch-book", kind="monotonicity")
    ep = next(env.episodes(1, seed=0))
    assert ep.truth["kind"] == "monotonicity"
    assert len(ep.turns) == 6
    for t, turn in enumerate(ep.turns):
        assert turn.index == t
        assert turn.messages["single-turn"] == ()
        assert len(turn.messages["multi-turn"]) == 2 * t
        assert {p.delivery for p in turn.probes} == {"single-turn", "multi-turn"}
        for probe in turn.probes:
            assert probe.labels == LABELS and probe.oracle is None
            assert len(probe.queries) == 2
            assert [q.outcome for q in probe.queries] == [(0, 1), (1, 0)]
    single = ep.turns[3].probes[0].queries[0].messages
    assert len(single) == 1 and single[0].role == "user"
    multi = ep.turns[3].probes[1].queries[0].messages
    assert [m.role for m in multi] == ["user", "assistant"] * 3 + ["user"]
    assert all(m.content == PLACEHOLDER_ANSWER for m in multi if m.role == "assistant")


def test_episodes_are_deterministic_and_cover_scenarios() -> None:
    env = envs.get("dutch-book", order="shuffled")
    a = list(env.episodes(40, seed=3))
    b = list(env.episodes(40, seed=3))
    assert a == b
    ids = [e.truth["scenario"] for e in a[:36]]
    assert len(set(ids)) == 36  # one full permutation before repeating
    c = list(env.episodes(40, seed=4))
    assert [e.truth["scenario"] for e in c] != [e.truth["scenario"] for e in a]


def test_dialogue_hook_takes_the_models_answers() -> None:
    ctx = dialogue(["Will A?", "Will B?"], ["Answer: A", "Answer: B"])
    assert [m.content for m in ctx if m.role == "assistant"] == ["Answer: A", "Answer: B"]
    with pytest.raises(ValueError):
        dialogue(["Will A?"], [])


def _write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "set.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def test_user_set_loads(tmp_path: Path) -> None:
    path = _write(tmp_path, {"scenarios": [
        {"id": "x", "kind": "normalisation", "questions": ["Will A?", "Will not A?"]},
        {"id": "y", "kind": "extensionality", "questions": ["Will B?", "Is B going to happen?"]},
    ]})
    env = envs.get("dutch-book", questions=str(path), delivery="multi-turn")
    eps = list(env.episodes(2, seed=0))
    assert {e.truth["scenario"] for e in eps} == {"x", "y"}
    assert all(p.delivery == "multi-turn" for e in eps for t in e.turns for p in t.probes)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"items": []}, "scenarios"),
        ({"scenarios": [{"id": "x", "kind": "bogus", "questions": ["a?", "b?"]}]},
         "scenarios[0].kind"),
        ({"scenarios": [{"id": "x", "kind": "normalisation", "questions": ["a?"]}]},
         "scenarios[0].questions"),
        ({"scenarios": [{"kind": "monotonicity", "questions": ["a?", "b?"]}]}, "scenarios[0].id"),
        ({"scenarios": [{"id": "x", "kind": "monotonicity", "questions": ["a?", 3]}]},
         "scenarios[0].questions"),
        ({"scenarios": [{"id": "x", "kind": "extensionality", "questions": ["a?", "b?"],
                         "extra": 1}]}, "scenarios[0].extra"),
        ({"scenarios": [{"id": "x", "kind": "extensionality", "questions": ["a?", "b?"]},
                        {"id": "x", "kind": "extensionality", "questions": ["c?", "d?"]}]},
         "scenarios[1].id"),
    ],
)
def test_malformed_sets_name_path_and_field(tmp_path: Path, data: object, field: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(ImportFormatError) as err:
        load_scenarios(path)
    assert str(path) in str(err.value)
    assert f"'{field}'" in str(err.value)


def test_unreadable_files(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json", encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"bad\.json"):
        load_scenarios(bad_json)
    with pytest.raises(ImportFormatError, match=r"missing\.json"):
        envs.get("dutch-book", questions=str(tmp_path / "missing.json"))


def test_bad_params() -> None:
    with pytest.raises(ParameterError):
        envs.get("dutch-book", kind="other")
    with pytest.raises(ParameterError):
        envs.get("dutch-book", delivery="multi-turn-self")


def test_yes_no_readout_offers_variants_in_both_orders() -> None:
    env = envs.get("dutch-book", kind="normalisation", readout="yes-no")
    ep = next(env.episodes(1, seed=0))
    probe = ep.turns[1].probes[1]
    assert probe.kind == "yes-no" and probe.labels == LABELS
    q0, q1 = probe.queries
    assert q0.options == (" Yes", " No", " yes", " no") and q0.outcome == (0, 1, 0, 1)
    assert q1.options == (" No", " Yes", " no", " yes") and q1.outcome == (1, 0, 1, 0)
    assert q0.messages[-1].content.endswith("Answer Yes or No.")
    assert q1.messages[-1].content.endswith("Answer No or Yes.")
    assert q0.prefill == q1.prefill == "Answer:"
    earlier = ep.turns[1].messages["multi-turn"][0].content
    assert earlier.endswith("Answer Yes or No.") and "A. Yes" not in earlier


class _ScriptedAnswers:
    """TEST DOUBLE: a TextGenerator that answers with the question count it has seen."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, float]] = []

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        self.calls.append((len(messages), seed, temperature))
        return f"Answer: {'A' if len(messages) % 4 == 1 else 'B'} (reply {len(self.calls)})"


def test_dialogue_uses_the_models_own_answers_when_bound() -> None:
    env = envs.get("dutch-book", answers="model", delivery="multi-turn", kind="monotonicity")
    assert env.requires_generator  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="answers=model"):
        next(iter(env.episodes(1, seed=0)))
    gen = _ScriptedAnswers()
    bound = env.bind_generator(gen)  # type: ignore[attr-defined]
    (ep,) = list(bound.episodes(1, seed=3))
    m = len(ep.turns)
    assert len(gen.calls) == m and all(t == 0.0 for _, _, t in gen.calls)
    last = ep.turns[-1].messages["multi-turn"]
    replies = [msg.content for msg in last if msg.role == "assistant"]
    assert replies == [f"Answer: {'A' if (2 * i + 1) % 4 == 1 else 'B'} (reply {i + 1})"
                       for i in range(m - 1)]
    assert PLACEHOLDER_ANSWER not in replies
    again = _ScriptedAnswers()
    assert list(env.bind_generator(again).episodes(1, seed=3)) == [ep]  # type: ignore[attr-defined]
    assert again.calls == gen.calls
    assert not envs.get("dutch-book", answers="model", delivery="single-turn").requires_generator  # type: ignore[attr-defined]
