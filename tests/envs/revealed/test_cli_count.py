"""`belieflens envs` shows how many prompts each revealed-belief grid yields, next to the
paper's totals (App. B)."""

from __future__ import annotations

from typer.testing import CliRunner

from belieflens import envs
from belieflens.cli.main import app
from belieflens.envs.revealed.counts import PAPER_TOTALS, prompt_counts


def test_envs_lists_grid_sizes() -> None:
    result = CliRunner().invoke(app, ["envs"])
    assert result.exit_code == 0, result.output
    blocks = {b.split(":", 1)[0]: b for b in result.output.split("\n\n") if b.strip()}
    for name in ("dice", "coins", "preference", "choice", "case-study"):
        env = envs.get(name)
        assert isinstance(env, envs.FiniteGrid)
        counts = prompt_counts(env)
        assert counts is not None and counts.stated == env.count()
        line = f"grid: {counts.revealed} revealed-belief prompts, {counts.stated} stated-answer"
        assert line in blocks[name]
        if name in PAPER_TOTALS:
            assert f"the paper's total: {PAPER_TOTALS[name]}" in blocks[name]
    assert "grid:" not in blocks["coin-flip"]  # open-ended environments have no grid size


def test_counts_that_match_the_paper() -> None:
    # choice: 3 + 12 scenarios; one stated question per outcome = 2+4+6 + (4+16+36) = 68
    choice = prompt_counts(envs.get("choice"))
    assert choice is not None and (choice.revealed, choice.stated) == (15, 68)
    # preference: 2 pairs x 2 orders x 3 biases x (1 + 2 previous) = 36 scenarios, 2 outcomes each
    pref = prompt_counts(envs.get("preference"))
    assert pref is not None and (pref.revealed, pref.stated) == (36, 72)
    assert prompt_counts(envs.get("coin-flip")) is None
