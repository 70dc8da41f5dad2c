"""The shared realistic reply tables (``fixtures/reply_tables.json``): their rows, and the
check every parser's table passes (at least 60 rows, at least 60 of them the embedded model's
own replies, at least 98% read as expected with the rest listed, the issue's cases all right)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

TABLE = Path(__file__).parent / "fixtures" / "reply_tables.json"

HELDOUT = Path(__file__).parent / "fixtures" / "heldout_replies.json"
"""Replies written and committed before the readers were changed to meet their review, never
used to choose a rule."""

Row = dict[str, Any]


def rows(name: str) -> list[Row]:
    """The table ``name`` (``twenty_questions``, ``belief_attribution``)."""
    table: list[Row] = json.loads(TABLE.read_text(encoding="utf-8"))[name]
    return table


def heldout(name: str) -> list[Row]:
    """The held-out table ``name`` (``twenty_questions``, ``belief_attribution``)."""
    table: list[Row] = json.loads(HELDOUT.read_text(encoding="utf-8"))[name]
    return table


def disagreements(table: list[Row], read: Callable[[Row], object],
                  describe: Callable[[Row], str]) -> list[str]:
    """One line per row whose reply ``read`` reads otherwise than ``expected``."""
    out = []
    for r in table:
        got = read(r)
        if got != r["expected"]:
            out.append(f"{describe(r)} | {r['reply']!r}: got {got}, expected {r['expected']}")
    return out


def check_table(table: list[Row], read: Callable[[Row], object],
                describe: Callable[[Row], str], issue_cases: int) -> None:
    """Assert the table's size and sources, ≥ 98% agreement (failures listed) and that its
    ``issue_cases`` rows from the issue all read as expected."""
    assert len(table) >= 60
    assert sum(r["source"].startswith("HuggingFaceTB/") for r in table) >= 60  # the model's own
    failed = disagreements(table, read, describe)
    agreement = 1 - len(failed) / len(table)
    assert agreement >= 0.98, "\n".join(failed)
    issue = [r for r in table if r["source"] == "issue"]
    assert len(issue) == issue_cases and not disagreements(issue, read, describe)
