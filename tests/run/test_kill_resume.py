"""Crash harness: SIGKILL a real `belieflens extract` at random points, resume, compare.

The reference file is written in-process by the same CLI; its
``info --rerun-command`` is the command the harness runs (so the rerun command
is tested to reproduce the file too). Each killed run leaves a valid partial
file whose complete rows only grow; the final resumed run computes only the
missing windows and its data equal the reference bit for bit.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from belieflens import open_cache
from belieflens.cli.main import app
from belieflens.errors import CacheFileError
from belieflens.run.resume import done_windows, windows
from belieflens.store.file import partial_path, read_partial
from belieflens.store.verify import verify
from tests.conftest import assert_same_data

WINDOW = 2
KILLS = 3


def _cli(*args: str) -> tuple[str, float]:
    import torch

    threads = torch.get_num_threads()
    t0 = time.perf_counter()
    try:
        r = CliRunner().invoke(app, list(args))
    finally:
        torch.set_num_threads(threads)
    assert r.exit_code == 0, r.output
    return r.output, time.perf_counter() - t0


def _wait_until_loaded(proc: subprocess.Popen[str]) -> bool:
    """Block until the process reports its model loaded (True) or exits (False)."""
    assert proc.stderr is not None
    return any("loaded in" in line for line in proc.stderr)


def _wait_until_allocated(proc: subprocess.Popen[str], partial: Path, out: Path) -> bool:
    """Poll until the partial file is in place (True) or the run ended or finished (False)."""
    deadline = time.monotonic() + 120.0
    while time.monotonic() < deadline:
        if partial.exists():
            return True
        if out.exists() or proc.poll() is not None:
            return False
        time.sleep(0.002)
    return False


def test_sigkill_at_random_points_then_resume_equals_reference(
    tiny_dir: Path, tmp_path: Path
) -> None:
    ref = tmp_path / "ref.h5"
    text, seconds = _cli(
        "extract", "coin-flip", "--set", "turns=2", "--set", "delivery=multi-turn",
        "--episodes", "4", "--model", str(tiny_dir), "--window", str(WINDOW),
        "--batch-size", "3", "--threads", "1", "--quiet", "--out", str(ref))
    loaded = re.search(r"loaded in ([\d.]+)s", text)
    assert loaded is not None, text
    run_time = max(0.2, seconds - float(loaded.group(1)))  # model work + writing
    command = shlex.split(_cli("info", "--rerun-command", str(ref))[0].strip())
    assert command[:3] == ["belieflens", "extract", "coin-flip"]
    assert command[-2:] == ["--out", str(ref)]
    out = tmp_path / "killed.h5"
    argv = [sys.executable, "-m", "belieflens.cli.main", *command[1:-1], str(out), "--quiet"]
    rng = np.random.default_rng(20261129)
    partial = partial_path(out)
    n_rows = -1
    last = 0
    killed_mid_run = 0
    for attempt in range(KILLS):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        # The first kill lands as soon as the partial file exists, so at least one kill
        # is mid-run however fast or slow this machine is; later kills land at random.
        if _wait_until_loaded(proc) and _wait_until_allocated(proc, partial, out) and attempt:
            left = 1.0 - (last / n_rows if n_rows > 0 else 0.0)
            time.sleep(float(rng.uniform(0.0, run_time * left)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        if out.exists():
            break  # the run finished before the kill
        if not partial.exists():
            continue  # killed while the file was still being allocated: nothing to keep
        killed_mid_run += 1
        state = read_partial(partial)  # a valid HDF5 file, never a damaged one
        count = int(state.complete.sum())
        n_rows = state.complete.size
        assert count >= last  # completed read-outs are never lost
        last = count
        problems = verify(out)
        assert len(problems) == 1 and "read-outs complete" in problems[0], problems
        with pytest.raises(CacheFileError, match="did not finish"):
            open_cache(out)
    assert killed_mid_run >= 1
    final = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    if n_rows > 0 and not out.exists():
        pytest.fail("the resumed run did not write the file")
    if last:
        found = re.search(r"resuming .*: (\d+) of (\d+) read-outs", final.stderr)
        assert found is not None, final.stderr
        wins = windows(n_rows, WINDOW)
        expected = sum(b - a for i, (a, b) in enumerate(wins)
                       if i in done_windows(state.complete, wins))
        assert int(found.group(1)) == expected == last
    assert not partial.exists()
    assert verify(out) == []
    assert_same_data(ref, out)
