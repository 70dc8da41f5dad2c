"""CLI wiring of generated text: the --simulator option fails fast on a bad model."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from belieflens.cli.main import app

runner = CliRunner()


def test_bad_simulator_is_one_line_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    r = runner.invoke(app, ["extract", "social-judgment", "--set", "engagement=active",
                            "--simulator", "nope", "--out", str(out)])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "unknown model" in lines[0]
    assert not out.exists()


def test_simulator_option_is_documented() -> None:
    r = runner.invoke(app, ["extract", "--help"])
    assert r.exit_code == 0 and "--simulator" in r.output
