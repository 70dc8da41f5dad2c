"""Prompt counts of the revealed-belief grids, as ``belieflens envs`` prints them, and the
paper's totals they are compared with (App. B)."""

from __future__ import annotations

from typing import Final

from belieflens.envs.revealed.grid import GridEnvironment, PromptCounts

PAPER_TOTALS: Final[dict[str, int]] = {"dice": 3080, "coins": 378, "preference": 72, "choice": 68}
"""The paper's prompt totals "in the RevB and StaA evaluation settings" (App. B)."""


def prompt_counts(env: object) -> PromptCounts | None:
    """The grid's prompt counts, or ``None`` for an environment that is not a revealed grid."""
    return env.prompt_counts() if isinstance(env, GridEnvironment) else None


def counts_line(name: str, env: object) -> str | None:
    """The ``grid:`` line of ``belieflens envs`` for ``env`` (``None`` if it has no grid)."""
    counts = prompt_counts(env)
    if counts is None:
        return None
    paper = PAPER_TOTALS.get(name)
    tail = "" if paper is None else f"; the paper's total: {paper}"
    return counts.text() + tail
