"""The answer a reply commits to, read as a careful reader reads it: a table of realistic
replies (the embedded model's own first and final replies in the benchmark's conversation,
the cases once misread, replies worded as larger models word them) with the expected
answer; at least 98% agree, the rest are listed."""

from __future__ import annotations

from belieflens.envs.belief_attribution.replies import committed_answer
from tests.envs.reply_tables import Row, check_table, disagreements, heldout, rows


def _read(r: Row) -> object:
    return committed_answer(r["reply"], r["answers"], r["question"])


def test_the_reply_table_reads_as_expected() -> None:
    # explanations of another entity are no commitments (the issue's three cases)
    check_table(rows("belief_attribution"), _read, lambda r: f"{r['question']} {r['answers']}",
                issue_cases=4)


def test_the_held_out_replies_read_as_expected() -> None:
    """Replies written before the reader was changed to meet their kinds (a later "X is in
    <place>" after the committed answer, and the reader's other rules on new wording)."""
    table = heldout("belief_attribution")
    assert len(table) >= 25
    assert not disagreements(table, _read, lambda r: f"{r['question']} {r['answers']}")
