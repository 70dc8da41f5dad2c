"""The write lock: a second writer is refused at once; a killed writer releases it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from belieflens.errors import CacheFileError
from belieflens.store.lock import lock_path, write_lock

HOLDER = """
import sys, time
from pathlib import Path
from belieflens.store.lock import write_lock
with write_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(60)
"""


def _hold(out: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_second_writer_refused_then_lock_released_on_kill(tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    proc = _hold(out)
    try:
        t0 = time.perf_counter()
        with (pytest.raises(CacheFileError, match=rf"another process \(pid {proc.pid}\)"),
              write_lock(out)):
            pass
        assert time.perf_counter() - t0 < 1.0  # refused at once, not after waiting
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert lock_path(out).exists()  # a stale lock file stays, but holds no lock
    with write_lock(out):
        assert lock_path(out).read_text().strip() == str(os.getpid())
    assert not lock_path(out).exists()


def test_lock_is_reentrant_in_one_process(tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    with write_lock(out), write_lock(out):
        assert lock_path(out).exists()
    assert not lock_path(out).exists()


def test_cli_refuses_second_writer(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from belieflens.cli.main import app

    out = tmp_path / "x.h5"
    proc = _hold(out)
    try:
        r = CliRunner().invoke(app, ["extract", "coin-flip", "--out", str(out), "--quiet"])
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert r.exit_code == 2 and "being written by another process" in r.output
    assert "model" not in r.output  # refused before loading any model
    assert not out.exists()
