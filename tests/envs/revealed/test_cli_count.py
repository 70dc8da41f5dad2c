"""`belieflens envs` shows how many prompts each revealed-belief grid yields."""

from __future__ import annotations

from typer.testing import CliRunner

from belieflens import envs
from belieflens.cli.main import app


def test_envs_lists_grid_sizes() -> None:
    result = CliRunner().invoke(app, ["envs"])
    assert result.exit_code == 0, result.output
    blocks = {b.split(":", 1)[0]: b for b in result.output.split("\n\n") if b.strip()}
    for name in ("dice", "coins", "preference", "choice", "case-study"):
        env = envs.get(name)
        assert isinstance(env, envs.FiniteGrid)
        n = env.count()
        assert f"grid: {n} prompts" in blocks[name]
    assert "grid:" not in blocks["coin-flip"]  # open-ended environments have no grid size
