"""The answerer's replies, parsed as a careful reader parses them: a table of realistic replies
(the embedded model's own generations, the cases once misread, replies worded as a larger
answerer words them) with the expected result; at least 98% agree, the rest are listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from belieflens.envs.twenty_questions.prompts import parse_answer

TABLE = Path(__file__).parents[1] / "fixtures" / "reply_tables.json"


def rows() -> list[dict[str, Any]]:
    table: list[dict[str, Any]] = json.loads(TABLE.read_text(encoding="utf-8"))[
        "twenty_questions"]
    return table


def disagreements(table: list[dict[str, Any]]) -> list[str]:
    """One line per reply the parser reads otherwise than expected."""
    out = []
    for r in table:
        got = list(parse_answer(r["reply"], r["question"], r["secret"]))
        if got != r["expected"]:
            out.append(f"{r['secret']} | {r['question']} | {r['reply']!r}: got {got}, "
                       f"expected {r['expected']}")
    return out


def test_the_reply_table_parses_as_expected() -> None:
    table = rows()
    assert len(table) >= 60
    assert sum(r["source"].startswith("HuggingFaceTB/") for r in table) >= 60  # the model's own
    failed = disagreements(table)
    agreement = 1 - len(failed) / len(table)
    assert agreement >= 0.98, "\n".join(failed)
    issue = [r for r in table if r["source"] == "issue"]
    assert len(issue) == 4 and not disagreements(issue)


def test_a_confirmed_attribute_question_never_ends_the_game() -> None:
    for r in rows():
        if parse_answer(r["reply"], r["question"], r["secret"])[0] == "Correct!":
            assert r["question"].lower().startswith("is it"), r
            assert r["secret"].lower().replace("ñ", "n") in r["question"].lower().replace(
                "ñ", "n"), r
