"""The answerer's replies, parsed as a careful reader parses them: a table of realistic replies
(the embedded model's own generations, the cases once misread, replies worded as a larger
answerer words them) with the expected result; at least 98% agree, the rest are listed."""

from __future__ import annotations

from belieflens.envs.twenty_questions.answers import parse_answer
from belieflens.envs.twenty_questions.names import match
from belieflens.envs.twenty_questions.prompts import guessed_name
from tests.envs.reply_tables import Row, check_table, disagreements, heldout, rows


def _read(r: Row) -> object:
    return list(parse_answer(r["reply"], r["question"], r["secret"]))


def test_the_reply_table_parses_as_expected() -> None:
    check_table(rows("twenty_questions"), _read, lambda r: f"{r['secret']} | {r['question']}",
                issue_cases=13)


def test_the_held_out_replies_read_as_expected() -> None:
    """Replies written before the reader was changed to meet their kinds (negated
    affirmations, affirmations and hedges outside its word lists, guesses by another name)."""
    table = heldout("twenty_questions")
    assert len(table) >= 40
    assert not disagreements(table, _read, lambda r: f"{r['secret']} | {r['question']}")


def test_a_confirmed_attribute_question_never_ends_the_game() -> None:
    """Only a guess that names the secret (by name, alias or head noun) can end the game."""
    for r in rows("twenty_questions") + heldout("twenty_questions"):
        if parse_answer(r["reply"], r["question"], r["secret"])[0] == "Correct!":
            name = guessed_name(r["question"])
            assert name is not None and match(name, r["secret"]) is not None, r
