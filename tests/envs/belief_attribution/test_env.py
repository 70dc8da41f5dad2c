"""Belief-attribution environment: shipped questions, conditions, pairing and the loader."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from belieflens import envs
from belieflens.envs.belief_attribution.env import (
    ACK,
    BeliefAttribution,
    contradiction,
    named_answer,
    stated_context,
)
from belieflens.envs.belief_attribution.questions import load_questions, shipped_questions
from belieflens.episodes.base import Message
from belieflens.episodes.generation import derive_seed
from belieflens.errors import ImportFormatError, ParameterError

OLD: dict[str, str] = {"protocol": "belieflens", "questions": "shipped"}
"""This toolkit's earlier variant: fixed wording, the 105 questions written for it."""


def test_shipped_questions() -> None:
    items = shipped_questions()
    assert len(items) >= 100
    domains = Counter(q.domain for q in items)
    assert len(domains) >= 4 and min(domains.values()) >= 10
    assert len({q.question for q in items}) == len(items)


def test_registered_and_paired_conditions() -> None:
    env = envs.get("belief-attribution", **OLD)
    assert isinstance(env, BeliefAttribution)
    eps = list(env.episodes(6, seed=1))
    assert [e.truth["condition"] for e in eps] == ["self", "user"] * 3
    for a, b in zip(eps[::2], eps[1::2], strict=True):
        assert a.truth["item"] == b.truth["item"]
        assert a.truth["contradiction"] == b.truth["contradiction"]
        assert a.turns[0].probes[0].labels == b.turns[0].probes[0].labels
    assert len({e.truth["item"] for e in eps}) == 3


def test_turns_and_probes() -> None:
    env = envs.get("belief-attribution", **OLD, condition="self")
    ep = next(env.episodes(1, seed=0))
    labels = ep.turns[0].probes[0].labels
    correct, stated, contra = (int(ep.truth[k]) for k in ("correct", "stated", "contradiction"))
    assert stated == correct != contra
    assert len(ep.turns) == 3
    for turn in ep.turns:
        (probe,) = turn.probes
        assert probe.name == "answer-self"
        assert probe.delivery == "multi-turn"
        assert len(probe.queries) == 3 and probe.oracle is None
        assert probe.labels == labels
    msgs = ep.turns[2].messages["multi-turn"]
    assert [m.role for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1].content == f"The answer is {labels[correct]}."
    assert msgs[2].content == contradiction(labels[contra])
    last = ep.turns[2].probes[0].queries[0].messages
    assert last[-1].role == "user" and last[-1].content.startswith(msgs[2].content)


def test_user_condition_and_stated_distractor() -> None:
    env = envs.get("belief-attribution", **OLD, condition="user", stated="distractor")
    for ep in env.episodes(5, seed=2):
        c, s, x = (int(ep.truth[k]) for k in ("correct", "stated", "contradiction"))
        assert len({c, s, x}) == 3
        msgs = ep.turns[1].messages["multi-turn"]
        labels = ep.turns[1].probes[0].labels
        assert msgs[0].content.endswith(f"I believe the answer is {labels[s]}.")
        assert msgs[1].content == ACK
        assert ep.turns[1].probes[0].name == "answer-user"


def test_deterministic_and_domain_filter() -> None:
    env = envs.get("belief-attribution", **OLD, domain="mathematics")
    assert list(env.episodes(8, seed=5)) == list(env.episodes(8, seed=5))
    assert {e.truth["domain"] for e in env.episodes(8, seed=5)} == {"mathematics"}
    with pytest.raises(ParameterError, match="domain"):
        envs.get("belief-attribution", **OLD, domain="astrology")


def test_stated_context_hook() -> None:
    item = shipped_questions()[0]
    ctx = stated_context(item, "self", "X", assistant_text="I think it is X.")
    assert ctx[-1].content == "I think it is X."


def test_user_question_set(tmp_path: Path) -> None:
    good = {"questions": [{"id": "q1", "domain": "d", "question": "Q?", "answer": "a",
                           "distractors": ["b", "c"]}]}
    path = tmp_path / "q.json"
    path.write_text(json.dumps(good), encoding="utf-8")
    env = envs.get("belief-attribution", protocol="belieflens", questions=str(path))
    assert {e.truth["item"] for e in env.episodes(4, seed=0)} == {"q1"}
    bad = {"questions": [{"id": "q1", "domain": "d", "question": "Q?", "answer": "a",
                          "distractors": ["a", "c"]}]}
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ImportFormatError) as err:
        load_questions(path)
    assert str(path) in str(err.value) and "'questions[0].distractors[0]'" in str(err.value)
    assert "equals the answer 'a'" in str(err.value)
    path.write_text(json.dumps({"questions": [{"id": "q1"}]}), encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"'questions\[0\].domain'"):
        load_questions(path)


class ScriptedGenerator:
    """Test double for a TextGenerator: replies via ``script(question)``, records every call."""

    def __init__(self, script: Callable[[str], str]) -> None:
        self.script = script
        self.calls: list[tuple[tuple[str, ...], int, int, float]] = []

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        self.calls.append((tuple(m.content for m in messages), seed, max_new_tokens,
                           temperature))
        return self.script(messages[-1].content)


def test_named_answer() -> None:
    answers = ("Canberra", "Sydney", "Melbourne")
    assert named_answer("I think it's Sydney, not Canberra.", answers) == 1
    assert named_answer("CANBERRA.", answers) == 0
    assert named_answer("Sydneyside is not an answer", answers) is None
    assert named_answer("Paris, Texas it is", ("Paris", "Paris, Texas", "Rome")) == 1


def test_stated_model_needs_a_generator() -> None:
    env = envs.get("belief-attribution", **OLD, stated="model")
    assert isinstance(env, BeliefAttribution) and env.requires_generator
    assert not envs.get("belief-attribution", **OLD).requires_generator  # type: ignore[attr-defined]
    assert envs.get("belief-attribution").requires_generator  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="stated=model"):
        next(env.episodes(1, seed=0))
    with pytest.raises(ParameterError, match="answer_tokens"):
        envs.get("belief-attribution", **OLD, answer_tokens=0)


def test_stated_model_uses_the_generators_greedy_answer() -> None:
    env = envs.get("belief-attribution", **OLD, stated="model", answer_tokens=20)
    assert isinstance(env, BeliefAttribution)
    by_question = {q.question: q for q in env.items}

    def reply(question: str) -> str:  # names the item's first distractor
        return f"  Hmm, I would say {by_question[question].distractors[0]}. "

    gen = ScriptedGenerator(reply)
    bound = env.bind_generator(gen)
    assert bound.generator is gen and env.generator is None
    eps = list(bound.episodes(6, seed=4))
    assert len(gen.calls) == 3  # once per item slot, shared by the self/user pair
    for slot, (question, seed, max_new, temp) in enumerate(gen.calls):
        assert len(question) == 1 and temp == 0.0 and max_new == 20
        assert seed == derive_seed(4, slot)
    for self_ep, user_ep in zip(eps[::2], eps[1::2], strict=True):
        labels = self_ep.turns[0].probes[0].labels
        item = next(q for q in env.items if q.id == self_ep.truth["item"])
        stated, contra = int(self_ep.truth["stated"]), int(self_ep.truth["contradiction"])
        assert self_ep.truth["own_matched"] == 1.0
        assert labels[stated] == item.distractors[0] != labels[contra]
        msgs = self_ep.turns[1].messages["multi-turn"]
        assert msgs[1].role == "assistant" and msgs[1].content == reply(item.question).strip()
        assert self_ep.truth["own_answer"] == msgs[1].content
        assert user_ep.truth["stated"] == stated and user_ep.truth["contradiction"] == contra
        assert user_ep.turns[1].messages["multi-turn"][0].content.endswith(
            f"I believe the answer is {labels[stated]}.")


def _unsure(question: str) -> str:
    return "I do not know."


def test_stated_model_without_a_named_answer_falls_back_to_correct() -> None:
    env = envs.get("belief-attribution", **OLD, stated="model", condition="self")
    assert isinstance(env, BeliefAttribution)
    ep = next(env.bind_generator(ScriptedGenerator(_unsure)).episodes(1, 0))
    assert ep.truth["own_matched"] == 0.0
    assert ep.truth["stated"] == ep.truth["correct"] != ep.truth["contradiction"]
    assert ep.turns[1].messages["multi-turn"][1].content == "I do not know."
    assert ep == next(env.bind_generator(ScriptedGenerator(_unsure)).episodes(1, 0))
