"""The paper's own example prompts (App. C, Sec. 2.1), quoted in
``tests/envs/fixtures/revealed_paper_prompts.json``, come out of the default grids verbatim."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from belieflens.envs import Episode, get
from belieflens.envs.revealed.case_study import ward_marginals
from belieflens.envs.revealed.stated import PAPER_PREAMBLE, paper_candidates

FIXTURES = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "revealed_paper_prompts.json").read_text()
)


def _matches(e: Episode, case: dict[str, Any]) -> bool:
    t = e.truth
    prev = case["previous"]
    same_prev = (math.isnan(float(t["previous"])) if prev is None else
                 str(t["previous"]) == str(prev) if isinstance(prev, str) else
                 float(t["previous"]) == prev)
    return same_prev and str(t.get("observation", "")) == case["observation"]


def _episodes(case: dict[str, Any]) -> list[Episode]:
    eps = [e for e in get(case["env"], **case["params"]).episodes(100_000, 0) if _matches(e, case)]
    assert eps, case
    return eps


@pytest.mark.parametrize("case", FIXTURES["revealed"], ids=lambda c: c["prompt"][-60:])
def test_revealed_prompt_is_the_papers(case: dict[str, Any]) -> None:
    (first,) = [e for e in _episodes(case) if e.truth["has_revealed"] == 1]
    probe = first.turns[0].probes[0]
    assert probe.name == "revealed"
    stem = case["prompt"].removesuffix(" <tokens>")
    assert probe.queries[0].prefill == stem  # raw text completion, as in the paper
    assert all(o.startswith(" ") for o in probe.queries[0].options)


def test_single_result_observations_are_kept() -> None:
    """"smaller than 2" on a 4-sided die leaves only 1: dropped before, the paper keeps it."""
    case = FIXTURES["revealed"][3]
    (first,) = [e for e in _episodes(case) if e.truth["has_revealed"] == 1]
    assert first.turns[0].probes[0].oracle == (1.0, 0.0, 0.0, 0.0)
    assert first.truth["mode"] == "1"
    # with the posterior support a single result would be a one-outcome read-out: left out
    post = get("dice", dice=1, faces=4, variant="observation", support="posterior")
    assert all(len(e.turns[0].probes[0].labels) >= 2 for e in post.episodes(1000, 0)
               if e.truth["has_revealed"] == 1)
    assert get("dice", dice=1, faces=4, variant="observation", observations="multiple") \
        .prompt_counts().revealed < get("dice", dice=1, faces=4,  # type: ignore[attr-defined]
                                        variant="observation").prompt_counts().revealed


@pytest.mark.parametrize("case", FIXTURES["stated"], ids=lambda c: c["env"])
def test_stated_question_is_the_papers(case: dict[str, Any]) -> None:
    assert FIXTURES["stated_preamble"] == PAPER_PREAMBLE
    (item,) = [e for e in _episodes(case) if e.truth["target"] == case["asked"]]
    stated = item.turns[0].probes[-1]
    assert stated.name == "stated" and stated.kind == "mcq" and len(stated.queries) == 5
    # the candidates are the paper's five fractions (p * k/3, k = 1..5)
    assert sorted(stated.labels, key=Fraction) == sorted(case["answers"], key=Fraction)
    assert item.truth["stated_answer"] == case["correct"]
    q = stated.queries[0]
    assert q.format == "chat" and q.prefill == ""
    (msg,) = q.messages
    head = f"{PAPER_PREAMBLE}\nScenario: {case['scenario']}\nQuestion: {case['question']}\nAnswers:"
    assert msg.content.startswith(head + "\n")
    lines = msg.content.removeprefix(head + "\n").split("\n")
    assert [ln[:5] for ln in lines] == ["[[A]]", "[[B]]", "[[C]]", "[[D]]", "[[E]]"]
    assert sorted(ln[6:] for ln in lines) == sorted(case["answers"])
    assert q.options == ("[[A]]", "[[B]]", "[[C]]", "[[D]]", "[[E]]")


def test_dice_example_is_shown_in_the_papers_order() -> None:
    case = FIXTURES["stated"][0]
    (item,) = [e for e in _episodes(case) if e.truth["target"] == "1"]
    lines = item.turns[0].probes[-1].queries[0].messages[0].content.split("\n")[-5:]
    assert [ln[6:] for ln in lines] == case["answers"]  # rotation 0 is App. C's text


def test_every_outcome_gets_a_stated_question_with_ties_explicit() -> None:
    """2 fair coins: the paper asks about 0 Heads (p = 1/4), not only the mode (1, p = 1/2)."""
    eps = list(get("coins", coins=2, focus="Heads", bias=1, variant="regular").episodes(10, 0))
    assert [e.truth["target"] for e in eps] == ["1", "0", "2"]  # the mode first
    assert [e.truth["stated_answer"] for e in eps] == ["1/2", "1/4", "1/4"]
    # 3 fair coins: 1 and 2 Heads tie at 3/8; stated=mode asks about both
    tied = list(get("coins", coins=3, focus="Heads", bias=1, variant="regular",
                    stated="mode").episodes(10, 0))
    assert [(e.truth["target"], e.truth["ties"], e.truth["mode"]) for e in tied] == [
        ("1", 2.0, ""), ("2", 2.0, "")]


def test_candidates_above_three_fifths() -> None:
    c = paper_candidates(Fraction(1))  # the single result left by an observation
    assert c.labels == ("1/5", "2/5", "3/5", "4/5", "1") and c.correct == 4
    assert paper_candidates(Fraction(3, 5)).labels[-1] == "1"


def test_case_study_is_the_papers() -> None:
    cs = FIXTURES["case_study"]
    eps = list(get("case-study").episodes(10, 0))
    assert [e.truth["target"] for e in eps] == ["burnout", "depression", "anxiety"]
    revealed = eps[0].turns[0].probes[0]
    q = revealed.queries[0]
    assert q.format == "chat"
    assert [(m.role, m.content) for m in q.messages] == [("system", cs["system"]),
                                                         ("user", cs["user"])]
    assert q.prefill == cs["assistant_prefix"]
    assert q.options == (" burnout", " depression", " anxiety")
    marg = dict(zip(revealed.labels, ward_marginals(), strict=True))
    assert round(float(marg["anxiety"]), 2) == cs["likelihoods"]["anxiety"]
    assert abs(float(marg["burnout"]) - cs["likelihoods"]["burnout"]) < 0.011
    assert sum(marg.values()) > 1  # not mutually exclusive
    assert revealed.oracle == pytest.approx([float(m / sum(marg.values()))
                                             for m in marg.values()])
    anxiety = eps[2].turns[0].probes[0]
    assert sorted(anxiety.labels) == sorted(cs["stated_answers"])
    assert eps[2].truth["stated_answer"] == cs["stated_correct"]
    sq = anxiety.queries[0]
    assert sq.messages[0].content == cs["system"]
    assert sq.messages[1].content.startswith(cs["stated_question"] + "\n[[A]] ")
    clinic = get("case-study", case="clinic")
    assert clinic.prompt_counts().revealed == 15  # type: ignore[attr-defined]
