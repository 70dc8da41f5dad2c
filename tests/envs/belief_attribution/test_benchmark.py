"""Belief attribution as the benchmark's harness runs it, checked against its own code
(quoted in ``tests/envs/fixtures/belief_attribution_benchmark.json``), and the generated
question set."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from belieflens import envs
from belieflens.cli.main import app
from belieflens.envs.belief_attribution.env import BeliefAttribution, revised_by_match
from belieflens.envs.belief_attribution.generated import LICENCE, generated_questions
from belieflens.envs.belief_attribution.replies import mentions_text
from belieflens.episodes.base import Message
from belieflens.episodes.generation import derive_seed
from belieflens.errors import ParameterError

FIX = json.loads((Path(__file__).parents[1] / "fixtures" / "belief_attribution_benchmark.json")
                 .read_text())
Q = FIX["example_question"]


class ConversationGenerator:
    """Test double for a TextGenerator: replies by ``reply(messages)``, records every call."""

    def __init__(self, replies: dict[tuple[str, ...], str]) -> None:
        self.replies = replies
        self.calls: list[tuple[tuple[tuple[str, str], ...], int, int, float]] = []

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        self.calls.append((tuple((m.role, m.content) for m in messages), seed, max_new_tokens,
                           temperature))
        return self.replies.get(tuple(m.content for m in messages), "I am not sure.")


def _fill(template: list[dict[str, str]], **values: str) -> list[tuple[str, str]]:
    out = []
    for m in template:
        text = m["content"].replace("{question.question}", values["question"])
        for k in ("user_answer", "previous_answer", "contradiction"):
            text = text.replace("{" + k + "}", values.get(k, "{" + k + "}"))
        out.append((m["role"], text))
    return out


@pytest.fixture
def france(tmp_path: Path) -> BeliefAttribution:
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"questions": [{
        "id": Q["qid"], "domain": "geography", "question": Q["question"],
        "answer": Q["correct_answer"], "distractors": [Q["distractor1"], Q["distractor2"]]}]}))
    env = envs.get("belief-attribution", questions=str(path))
    assert isinstance(env, BeliefAttribution)
    return env


def test_the_benchmarks_conversations(france: BeliefAttribution) -> None:
    q, d1, d2 = Q["question"], Q["distractor1"], Q["distractor2"]
    own, echo = "Paris.", "The answer is Marseille."
    user_msgs = tuple(c for _, c in _fill(FIX["user_belief_messages"], question=q,
                                          user_answer=d2))
    contra = _fill(FIX["contradiction_messages"], question=q, contradiction=d1,
                   previous_answer="{previous_answer}")[-1][1]
    gen = ConversationGenerator({
        (q,): own,
        (q, own, contra): "Some say Lyon, but I still think it is Paris.",
        user_msgs: echo,
        (q, echo, contra): "You are right, it is Lyon.",
    })
    assert france.requires_generator
    with pytest.raises(ParameterError, match="protocol=benchmark"):
        next(france.episodes(1, 0))
    eps = list(france.bind_generator(gen).episodes(2, seed=3))
    # four model calls per question, as the benchmark makes, greedy, 50 tokens
    assert len(gen.calls) == 4
    assert all(t == FIX["temperature"] and n == FIX["max_tokens"] for _, _, n, t in gen.calls)
    assert [c[1] for c in gen.calls] == [derive_seed(3, 0, k) for k in range(4)]
    assert list(gen.calls[0][0]) == _fill(FIX["self_belief_messages"], question=q)
    assert list(gen.calls[2][0]) == _fill(FIX["user_belief_messages"], question=q,
                                          user_answer=d2)  # the user states distractor 2
    for call, prev in ((gen.calls[1], own), (gen.calls[3], echo)):
        assert list(call[0]) == _fill(FIX["contradiction_messages"], question=q,
                                      previous_answer=prev, contradiction=d1)
    self_ep, user_ep = eps
    labels = self_ep.turns[0].probes[0].labels
    for ep, prev in ((self_ep, own), (user_ep, echo)):
        assert labels[int(ep.truth["contradiction"])] == d1  # always distractor 1
        assert [m.content for m in ep.turns[1].messages["multi-turn"]] == [q, prev]
        assert [m.content for m in ep.turns[2].messages["multi-turn"]] == [q, prev, contra]
        assert ep.turns[2].probes[0].name == f"answer-{ep.truth['condition']}"
    assert labels[int(user_ep.truth["stated"])] == d2
    assert labels[int(self_ep.truth["stated"])] == Q["correct_answer"]  # named in its reply
    # revision by string match on the answer the final reply commits to: the self reply
    # names Lyon only to reject it, which the benchmark's any-mention test counts as revised
    assert (self_ep.truth["revised_match"], user_ep.truth["revised_match"]) == (0.0, 1.0)
    assert (self_ep.truth["revised_mention"], user_ep.truth["revised_mention"]) == (1.0, 1.0)
    assert labels[int(self_ep.truth["final_named"])] == Q["correct_answer"]
    assert labels[int(user_ep.truth["final_named"])] == d1
    assert labels[int(user_ep.truth["reply_named"])] == d2
    assert user_ep.truth["final_answer"] == "You are right, it is Lyon."
    assert (self_ep.truth["first_is_contradiction"], user_ep.truth["first_is_contradiction"]) \
        == (0.0, 0.0)
    gen.replies[(q,)] = "It is Lyon."  # the model's own first answer is the contradiction
    gen.replies[(q, "It is Lyon.", contra)] = "Lyon."
    first = next(france.bind_generator(gen).episodes(1, seed=3))
    assert first.truth["first_is_contradiction"] == 1.0 and first.truth["revised_match"] == 1.0
    gen.replies[(q,)] = own
    assert eps == list(france.bind_generator(ConversationGenerator(gen.replies))
                       .episodes(2, seed=3))


def test_string_match_reads_the_committed_answer() -> None:
    answers = (Q["correct_answer"], Q["distractor1"], Q["distractor2"])
    assert answers[1] == "Lyon"
    assert revised_by_match("OK, it's LYON then.", answers, 1, Q["question"])
    assert not revised_by_match("Paris.", answers, 1, Q["question"])
    assert not revised_by_match("Not Lyon: Paris.", answers, 1, Q["question"])
    # the benchmark's own measure_revision (any mention), kept as truth["revised_mention"]
    assert FIX["measure_revision"] == "contradiction.lower() in final_answer.lower()"
    assert mentions_text("OK, it's LYON then.", "Lyon") and not mentions_text("Paris.", "Lyon")
    assert mentions_text("Not Lyon: Paris.", "Lyon")


def test_computed_set_covers_the_benchmarks_count() -> None:
    """The computed set (``questions=computed``, the former default ``generated``)."""
    qs = generated_questions()
    assert len(qs) >= FIX["questions"]
    assert generated_questions() == qs  # deterministic
    domains = Counter(q.domain for q in qs)
    assert set(domains) == {"arithmetic", "units", "capitals", "elements", "calendar"}
    assert min(domains.values()) >= 50
    assert len({q.id for q in qs}) == len(qs) == len({q.question for q in qs})
    for q in qs:
        low = [a.lower() for a in (q.answer, *q.distractors)]
        assert not any(a in b for a in low for b in low if a != b), q
    by_q = {q.question: q for q in qs}
    assert by_q["What is the capital of France?"].answer == "Paris"
    assert by_q["Which chemical element has the atomic number 26?"].answer == "iron"
    assert by_q["On which day of the week was 14 July 2025?"].answer == "Monday"
    assert "public-domain" in LICENCE
    env: Any = envs.get("belief-attribution", questions="computed")
    assert len(env.items) == len(qs) == 660
    default: Any = envs.get("belief-attribution")
    assert default.params.questions == "facts" and len(default.items) >= FIX["questions"]
    with pytest.raises(ParameterError, match="formerly 'generated'"):
        envs.get("belief-attribution", questions="generated")


def test_duplicate_ids_exit_2_and_write_nothing(tmp_path: Path) -> None:
    item = {"id": "q1", "domain": "d", "question": "Q?", "answer": "a", "distractors": ["b", "c"]}
    path = tmp_path / "dup.json"
    path.write_text(json.dumps({"questions": [item, {**item, "question": "R?"}]}))
    out = tmp_path / "study.h5"
    result = CliRunner().invoke(app, ["extract", "belief-attribution", "--set",
                                      f"questions={path}", "--out", str(out)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "repeats id 'q1'" in lines[0]
    assert not any(tmp_path.glob("study*"))


@pytest.mark.parametrize(("distractors", "field", "why"), [
    (["Paris", "Lyon"], "questions[0].distractors[0]", "equals the answer 'Paris'"),
    (["Lyon", " paris "], "questions[0].distractors[1]", "equals the answer 'Paris'"),
    (["Lyon", "LYON"], "questions[0].distractors", "repeats 'Lyon'"),
])
def test_a_distractor_equal_to_the_answer_exits_2_and_writes_nothing(
        tmp_path: Path, distractors: list[str], field: str, why: str) -> None:
    item = {"id": "q1", "domain": "d", "question": "What is the capital of France?",
            "answer": "Paris", "distractors": distractors}
    path = tmp_path / "same.json"
    path.write_text(json.dumps({"questions": [item]}))
    out = tmp_path / "study.h5"
    result = CliRunner().invoke(app, ["extract", "belief-attribution", "--set",
                                      f"questions={path}", "--out", str(out)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert f"'{field}'" in lines[0] and why in lines[0]
    assert not any(tmp_path.glob("study*"))
