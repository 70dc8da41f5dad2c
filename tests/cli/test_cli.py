"""CLI: listing, and bad input -> one line on stderr, exit code 2, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from belieflens.cli.main import app

runner = CliRunner()


def test_envs_lists_parameters() -> None:
    r = runner.invoke(app, ["envs"])
    assert r.exit_code == 0
    assert "coin-flip" in r.output and "bins (int, default 5)" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["extract", "coin-flip", "--set", "bins=1"], "'bins'"),
        (["extract", "coin-flip", "--set", "bins"], "NAME=VALUE"),
        (["extract", "roulette"], "unknown environment"),
        (["extract", "coin-flip", "--model", "nope"], "unknown model"),
        (["extract", "coin-flip", "--device", "tpu"], "'--device'"),
        (["extract", "coin-flip", "--episodes", "0"], "'--episodes'"),
    ],
)
def test_bad_extract_input(args: list[str], fragment: str, tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    r = runner.invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 2
    assert fragment in r.output
    assert "Traceback" not in r.output
    assert not out.exists() and not list(tmp_path.iterdir())


def test_existing_output_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    out.write_bytes(b"precious")
    r = runner.invoke(app, ["extract", "coin-flip", "--out", str(out)])
    assert r.exit_code == 2 and "--overwrite" in r.output
    assert out.read_bytes() == b"precious"


@pytest.mark.parametrize("content", [b"", b"not hdf5 at all", b"\x89HDF\r\n\x1a\n" + b"\0" * 64])
def test_bad_cache_files(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "bad.h5"
    f.write_bytes(content)
    for cmd in ("info", "analyze"):
        r = runner.invoke(app, [cmd, str(f)])
        assert r.exit_code == 2, r.output
        assert r.output.startswith("error: ") and "Traceback" not in r.output


def test_missing_file_mentions_partial(tmp_path: Path) -> None:
    (tmp_path / "run.h5.partial").write_bytes(b"x")
    r = runner.invoke(app, ["info", str(tmp_path / "run.h5")])
    assert r.exit_code == 2 and "partial" in r.output


def test_console_script_exit_code() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "belieflens.cli.main", "extract", "coin-flip", "--set", "a0=-1",
         "--out", "/tmp/never-written.h5"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "'a0'" in r.stderr


@pytest.mark.parametrize("group", [[], ["intervene"], ["lens"]])
def test_help_lists_each_command_summary_as_whole_sentences(group: list[str]) -> None:
    """At any width each summary is its docstring's first paragraph, one sentence run on
    (the docstring's own line breaks used to cut compare's, teach's and models' mid-way)."""
    import inspect
    import re

    from belieflens.cli.main import app as root

    apps = {"": root, **{i.name: i.typer_instance for i in root.registered_groups}}
    chosen = apps["".join(group)]
    assert chosen is not None
    commands = chosen.registered_commands
    wide = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "400"})
    assert wide.exit_code == 0
    for command in commands:
        name = command.name or command.callback.__name__.replace("_", "-")  # type: ignore[union-attr]
        doc = inspect.getdoc(command.callback) or ""
        summary = " ".join(doc.split("\n\n")[0].split())
        assert summary.endswith("."), name
        row = re.compile(rf"^│ {re.escape(name)} +{re.escape(summary)} +│$", re.M)
        assert row.search(wide.output), f"{name}: not one row:\n{wide.output}"


@pytest.mark.parametrize("command", [["analyze"], ["info"], ["compare", "{ok}"]])  # bad first
@pytest.mark.parametrize("bad", ["missing", "not-hdf5", "unreadable"])
def test_a_bad_path_is_one_line_naming_it(command: list[str], bad: str, tmp_path: Path) -> None:
    """A missing, non-HDF5 or unreadable path given to analyze, info or compare: one line that
    names the path, exit 2, no traceback."""
    import os

    path = tmp_path / f"{bad}.h5"
    if bad != "missing":
        path.write_bytes(b"not hdf5 at all")
    if bad == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads a file whatever its mode")
        path.chmod(0)
    ok = tmp_path / "other.h5"
    ok.write_bytes(b"")
    args = [command[0], str(path), *(a.format(ok=ok) for a in command[1:])]
    r = runner.invoke(app, args)
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert str(path) in lines[0], r.output
