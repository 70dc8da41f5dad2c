"""The answerer's replies, parsed as a careful reader parses them: a table of realistic replies
(the embedded model's own generations, the cases once misread, replies worded as a larger
answerer words them) with the expected result; at least 98% agree, the rest are listed."""

from __future__ import annotations

from belieflens.envs.twenty_questions.prompts import parse_answer
from tests.envs.reply_tables import Row, check_table, rows


def _read(r: Row) -> object:
    return list(parse_answer(r["reply"], r["question"], r["secret"]))


def test_the_reply_table_parses_as_expected() -> None:
    check_table(rows("twenty_questions"), _read, lambda r: f"{r['secret']} | {r['question']}",
                issue_cases=4)


def test_a_confirmed_attribute_question_never_ends_the_game() -> None:
    for r in rows("twenty_questions"):
        if parse_answer(r["reply"], r["question"], r["secret"])[0] == "Correct!":
            assert r["question"].lower().startswith("is it"), r
            assert r["secret"].lower().replace("ñ", "n") in r["question"].lower().replace(
                "ñ", "n"), r
