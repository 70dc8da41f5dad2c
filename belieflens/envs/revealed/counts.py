"""Prompt counts of the revealed-belief grids, as ``belieflens envs`` prints them, and the
paper's totals they are compared with (App. B).

Two counts per grid: **revealed-belief prompts** (grid points: one scenario, one
completion read-out) and **stated-answer questions** (items: a grid point and one
outcome asked about; with ``stated=every`` one per possible outcome; each item is one
episode). The paper gives one total per scenario "in the RevB and StaA evaluation
settings". Its unit appears to be the item, each read in both settings (the RevB
belief in the asked outcome, and the MCQ): choice (15 scenarios, 2+4+6 + 4+16+36 = 68
items) and preference (36 scenarios x 2 options = 72) match it exactly. Dice and coins
do not: every outcome of every scenario gives 11,200 and 672 items (the repeated
variants ask about each outcome after each previous result: 4,425 items per dice
variant, 300 per coins variant). For coins, 162 scenarios plus one question per
outcome of the regular variant (72) and one per repeated scenario (144) would give 378,
but that reading gives choice 39 and preference 84, and no reading found reproduces
3,080 for dice (748 scenarios with the paper's single-result observation sets, 734
without them).
"""

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
