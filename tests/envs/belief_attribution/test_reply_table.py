"""The answer a reply commits to, read as a careful reader reads it: a table of realistic
replies (the embedded model's own first and final replies in the benchmark's conversation,
the cases once misread, replies worded as larger models word them) with the expected
answer; at least 98% agree, the rest are listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from belieflens.envs.belief_attribution.replies import committed_answer

TABLE = Path(__file__).parents[1] / "fixtures" / "reply_tables.json"


def rows() -> list[dict[str, Any]]:
    table: list[dict[str, Any]] = json.loads(TABLE.read_text(encoding="utf-8"))[
        "belief_attribution"]
    return table


def disagreements(table: list[dict[str, Any]]) -> list[str]:
    """One line per reply read otherwise than expected."""
    out = []
    for r in table:
        got = committed_answer(r["reply"], r["answers"], r["question"])
        if got != r["expected"]:
            out.append(f"{r['question']} {r['answers']} | {r['reply']!r}: got {got}, "
                       f"expected {r['expected']}")
    return out


def test_the_reply_table_reads_as_expected() -> None:
    table = rows()
    assert len(table) >= 60
    assert sum(r["source"].startswith("HuggingFaceTB/") for r in table) >= 60  # the model's own
    failed = disagreements(table)
    agreement = 1 - len(failed) / len(table)
    assert agreement >= 0.98, "\n".join(failed)
    issue = [r for r in table if r["source"] == "issue"]
    assert len(issue) == 3 and not disagreements(issue)  # explanations are no commitments
