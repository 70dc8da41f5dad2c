"""CLI wiring of generated text: --simulator and --gen-batch fail fast on bad values."""

from __future__ import annotations

from pathlib import Path

import pytest
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


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_gen_batch_is_one_line_exit_2_before_any_work(tmp_path: Path, value: str) -> None:
    out = tmp_path / "x.h5"
    r = runner.invoke(app, ["extract", "twenty-questions", "--gen-batch", value,
                            "--out", str(out)])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert lines == [f"error: option '--gen-batch' = {value} is not allowed: >= 1, or auto"]
    assert not out.exists()


def test_gen_batch_option_is_documented() -> None:
    r = runner.invoke(app, ["extract", "--help"])
    assert r.exit_code == 0 and "--gen-batch" in r.output
