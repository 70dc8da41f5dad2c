"""CLI: a full disk and SIGTERM during ``extract`` are one line each, exit 2 and 143."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from belieflens.cli.main import app
from belieflens.store.file import PartialFile, Run, partial_path, read_partial
from tests.smallfs import leftovers


def _extract(tiny_dir: Path, out: Path) -> tuple[int, list[str]]:
    import torch

    threads = torch.get_num_threads()
    try:
        r = CliRunner().invoke(app, [
            "extract", "coin-flip", "--set", "turns=2", "--episodes", "2", "--model",
            str(tiny_dir), "--threads", "1", "--quiet", "--checkpoint-seconds", "0",
            "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert "Traceback" not in r.output
    return r.exit_code, [ln for ln in r.stderr.splitlines() if "loaded in" not in ln]


class _FakeStatvfs:
    f_bavail, f_frsize = 10, 4096


def test_too_little_space_exits_2_in_one_line(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "statvfs", lambda path: _FakeStatvfs())
    code, lines = _extract(tiny_dir, tmp_path / "x.h5")
    assert code == 2
    assert len(lines) == 1 and re.fullmatch(
        r"error: not enough space on / for .*x\.h5: [\d.]+ MB needed, 41\.0 kB free; free "
        r"space or choose another --out", lines[0]), lines
    assert leftovers(tmp_path) == []


def test_sigterm_exits_143_saying_what_was_saved(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_runs = PartialFile.write_runs

    def then_sigterm(self: PartialFile, runs: Sequence[Run]) -> None:
        write_runs(self, runs)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(PartialFile, "write_runs", then_sigterm)
    out = tmp_path / "x.h5"
    code, lines = _extract(tiny_dir, out)
    complete = read_partial(partial_path(out)).complete
    assert code == 143
    assert lines == [f"interrupted: {int(complete.sum())} of {complete.size} read-outs saved "
                     f"in {partial_path(out)}; rerun the same command to resume"]
    assert 0 < complete.sum() < complete.size
