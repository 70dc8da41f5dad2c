"""Storage faults and signals during an extraction (issue: a full disk, a killed run).

The space check refuses a file that does not fit before anything is written (a patched
``os.statvfs`` and a real 128 kB tmpfs); a full disk while allocating removes the temporary
file; ENOSPC or EIO in a write keeps the rows already saved; SIGTERM after the first
checkpoint saves them too; and each rerun computes only what was not saved and equals an
uninterrupted run bit for bit. A tiny random model keeps each test to a few seconds.
"""

from __future__ import annotations

import errno
import os
import re
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from belieflens import envs
from belieflens.episodes.base import Environment
from belieflens.errors import InterruptedRunError, StorageError
from belieflens.model.load import LoadedModel
from belieflens.run import runner
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache
from belieflens.store import space
from belieflens.store.file import PartialFile, Run, partial_path, read_partial
from tests.conftest import assert_same_data
from tests.smallfs import leftovers, small_fs

pytestmark = pytest.mark.usefixtures("one_thread")

OPTIONS = ExtractOptions(episodes=2, max_rows=3, window=64)
"""One window holds the whole study: only a checkpoint by time saves anything before its end."""


def _env() -> Environment:
    return envs.get("coin-flip", turns=2, delivery="multi-turn")


@pytest.fixture(scope="module")
def reference(tiny_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cache(_env(), tiny_model, tmp_path_factory.mktemp("ref") / "ref.h5", OPTIONS)


class _FakeStatvfs:
    f_bavail, f_frsize = 100, 4096  # 409.6 kB free


def _count_computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows the runner computes from now on (the study is one window: rows = indices)."""
    computed: list[int] = []
    run_queries = runner.run_queries

    def counting(*a: Any, **k: Any) -> Iterator[tuple[list[int], list[Any], int]]:
        for batch, outs, n in run_queries(*a, **k):
            computed.extend(batch)
            yield batch, outs, n

    monkeypatch.setattr(runner, "run_queries", counting)
    return computed


def _resume_equals(reference: Path, tiny_model: LoadedModel, out: Path,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Rerun: only the rows not marked complete are computed, and the file is the reference's."""
    missing = sorted(int(i) for i in np.flatnonzero(~read_partial(partial_path(out)).complete))
    computed = _count_computed(monkeypatch)
    write_cache(_env(), tiny_model, out, OPTIONS)
    assert sorted(computed) == missing
    assert not partial_path(out).exists()
    assert_same_data(reference, out)


def test_too_little_space_is_one_line_before_writing(
    tiny_model: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "statvfs", lambda path: _FakeStatvfs())
    out = tmp_path / "x.h5"
    with pytest.raises(StorageError) as caught:
        write_cache(_env(), tiny_model, out, OPTIONS)
    line = str(caught.value)
    assert re.fullmatch(rf"not enough space on / for {out}: [\d.]+ MB needed, 409\.6 kB free; "
                        "free space or choose another --out", line), line
    assert leftovers(tmp_path) == []


def test_small_filesystem_before_and_during_allocation(
    tiny_model: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with small_fs(tmp_path / "small", "128k") as fs:  # the file takes 254 kB
        out = fs / "x.h5"
        with pytest.raises(StorageError, match=rf"not enough space on {fs} for {out}: .* "
                           r"needed, 1[23]\d\.\d kB free"):
            write_cache(_env(), tiny_model, out, OPTIONS)
        assert leftovers(fs) == []
        # the check passed over (as if the estimate were short): the disk fills while allocating
        monkeypatch.setattr(space, "require", lambda path, needed: None)
        with pytest.raises(StorageError) as caught:
            write_cache(_env(), tiny_model, out, OPTIONS)
        assert str(caught.value) == (f"no space left on {fs} while allocating "
                                     f"{partial_path(out)}; free space and rerun the same "
                                     "command")
        assert leftovers(fs) == []  # no .partial.new filling the disk


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_write_fault_keeps_the_saved_rows_and_rerun_resumes(
    reference: Path, tiny_model: LoadedModel, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, code: int,
) -> None:
    """The store's write fails on its third commit (two batches saved, by time)."""
    calls: list[int] = []
    write = PartialFile._write

    def failing(self: PartialFile, runs: Sequence[Run]) -> None:
        calls.append(len(runs))
        if len(calls) == 3:
            raise OSError(code, os.strerror(code))
        write(self, runs)

    monkeypatch.setattr(PartialFile, "_write", failing)
    out = tmp_path / "x.h5"
    with pytest.raises(StorageError) as caught:
        write_cache(_env(), tiny_model, out, OPTIONS, checkpoint_seconds=0)
    complete = read_partial(partial_path(out)).complete
    saved = int(complete.sum())
    assert 0 < saved < complete.size
    kind, advice = (("no space left", "free space") if code == errno.ENOSPC
                    else ("I/O error", "check the disk"))
    assert str(caught.value) == (
        f"{kind} on {space.mount_point(out)} after {saved} of {complete.size} read-outs (kept "
        f"in x.h5.partial); {advice} and rerun to resume")
    assert leftovers(tmp_path) == ["x.h5.partial"]
    monkeypatch.setattr(PartialFile, "_write", write)
    _resume_equals(reference, tiny_model, out, monkeypatch)


def test_sigterm_after_the_first_checkpoint_saves_it_and_rerun_computes_the_rest(
    reference: Path, tiny_model: LoadedModel, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    needed: list[int] = []
    require = space.require
    write_runs = PartialFile.write_runs

    def measured(path: Path, n: int) -> None:
        needed.append(n)
        require(path, n)

    def then_sigterm(self: PartialFile, runs: Sequence[Run]) -> None:
        write_runs(self, runs)
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal, through the real handler

    monkeypatch.setattr(space, "require", measured)
    monkeypatch.setattr(PartialFile, "write_runs", then_sigterm)
    out = tmp_path / "x.h5"
    computed = _count_computed(monkeypatch)
    with pytest.raises(InterruptedRunError) as caught:
        write_cache(_env(), tiny_model, out, OPTIONS, checkpoint_seconds=0)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is given back
    complete = read_partial(partial_path(out)).complete
    saved = int(complete.sum())
    # the first batch, committed by time; the run stopped before computing another
    assert 0 < saved < complete.size
    assert sorted(computed) == [int(i) for i in np.flatnonzero(complete)]
    assert caught.value.exit_code == 143
    assert str(caught.value) == (f"{saved} of {complete.size} read-outs saved in "
                                 f"{partial_path(out)}; rerun the same command to resume")
    monkeypatch.setattr(PartialFile, "write_runs", write_runs)
    _resume_equals(reference, tiny_model, out, monkeypatch)
    assert len(needed) == 1 and os.path.getsize(out) <= needed[0]  # the check's estimate holds


def test_checkpoints_by_time_commit_within_a_window(
    tiny_model: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a long interval, the one window is committed once; with 0, after every batch."""
    commits: list[int] = []
    write_runs = PartialFile.write_runs

    def counted(self: PartialFile, runs: Sequence[Run]) -> None:
        commits.append(sum(next(iter(v.values())).shape[0] for _, v in runs))
        write_runs(self, runs)

    monkeypatch.setattr(PartialFile, "write_runs", counted)
    write_cache(_env(), tiny_model, tmp_path / "a.h5", OPTIONS, checkpoint_seconds=3600)
    assert len(commits) == 1
    total = commits[0]
    commits.clear()
    write_cache(_env(), tiny_model, tmp_path / "b.h5", OPTIONS, checkpoint_seconds=0)
    assert len(commits) > 1 and sum(commits) == total
    assert_same_data(tmp_path / "a.h5", tmp_path / "b.h5")


def test_sigterm_while_rendering_says_nothing_was_saved(
    tiny_model: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from belieflens.run import extract as cache_extract

    prepare = cache_extract.prepare

    def then_sigterm(*a: Any, **k: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)
        return prepare(*a, **k)

    monkeypatch.setattr("belieflens.run.lifecycle.prepare", then_sigterm)  # the lifecycle's
    out = tmp_path / "x.h5"
    with pytest.raises(InterruptedRunError) as caught:
        write_cache(_env(), tiny_model, out, OPTIONS)
    assert str(caught.value) == (f"stopped by SIGTERM: no read-out saved ({partial_path(out)} "
                                 "was not created); rerun the same command to start")
    assert caught.value.exit_code == 143 and leftovers(tmp_path) == []
