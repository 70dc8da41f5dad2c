"""Saving an extraction's read-outs as they finish: by time, at each window's end, on a stop.

Rows are computed window by window (:mod:`belieflens.run.resume`) and, within a window, batch
by batch. :class:`Saver` keeps the read-outs of the window that runs and commits them to the
partial file (:meth:`~belieflens.store.file.PartialFile.write_runs`: data synced before the
rows are marked complete) at batch boundaries: at least every ``seconds`` of compute
(``--checkpoint-seconds``, default :data:`CHECKPOINT_SECONDS`), at the window's end, and
when a signal asks the run to stop (:mod:`belieflens.run.signals`). A run stopped or killed
loses at most one interval. The rerun computes only the rows not marked complete, in batches
composed as in an uninterrupted run (the runners' ``skip``), so its file equals an
uninterrupted run's bit for bit.

:meth:`Saver.faults` turns what stops a run into one line that says what was saved: a
signal (:class:`~belieflens.errors.InterruptedRunError`, exit 130 or 143), no space left
or an I/O error (:class:`~belieflens.errors.StorageError`, exit 2; the partial file keeps its
complete rows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from belieflens.errors import CacheFileError, InterruptedRunError
from belieflens.run.rows import ReadOut
from belieflens.run.signals import Stop, name
from belieflens.store import space
from belieflens.store.file import PartialFile, Run, read_partial

CHECKPOINT_SECONDS = 60.0
"""Default seconds of compute between two commits within a window (``--checkpoint-seconds``)."""

Stack = Callable[[Sequence[ReadOut]], dict[str, np.ndarray]]
"""Read-outs of consecutive rows to the file's model variables, one row each."""


def runs(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted ``rows`` as ``[(start, stop), ...]`` of consecutive ones."""
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][1] == r:
            out[-1] = (out[-1][0], r + 1)
        else:
            out.append((r, r + 1))
    return out


def stop_line(saved: int, total: int, partial: Path) -> str:
    """What a stopped extraction saved, and how to go on."""
    if not partial.exists():
        return f"no read-out saved ({partial} was not created); rerun the same command to start"
    return (f"{saved} of {total} read-outs saved in {partial}; rerun the same command to "
            "resume")


class Saver:
    """The read-outs of an extraction, committed to its partial file at batch boundaries.

    ``complete`` holds the file's ``complete`` flags and is kept up to date; ``stack`` makes
    the file's model variables of consecutive read-outs.
    """

    def __init__(self, writer: PartialFile, complete: np.ndarray, *, seconds: float,
                 stop: Stop, stack: Stack, max_pending: int | None = None) -> None:
        self.writer, self.stop, self.stack, self.seconds = writer, stop, stack, seconds
        self.max_pending = max_pending
        """Commit once this many read-outs wait (``None``: the interval and the window's end
        only), so what is held stays within the memory budget."""
        self.complete = complete.astype(bool)
        self.saved = int(self.complete.sum())
        self.start = 0
        self.pending: dict[int, ReadOut] = {}
        """Read-outs of the window computed but not yet committed, by row in the window."""
        self.last = time.monotonic()

    @property
    def total(self) -> int:
        """Rows of the file."""
        return int(self.complete.size)

    @property
    def done(self) -> int:
        """Rows saved or waiting in memory for the next commit."""
        return self.saved + len(self.pending)

    def window(self, start: int, stop: int) -> set[int] | None:
        """Begin the window of rows ``start:stop``: its rows already saved (numbered from
        ``start``), or ``None`` when all are (nothing to run)."""
        flags = self.complete[start:stop]
        if bool(flags.all()):
            return None
        self.start = start
        return {int(i) for i in np.flatnonzero(flags)}

    def add(self, rows: Sequence[int], outs: Sequence[ReadOut]) -> None:
        """Keep the read-outs of a finished batch (``rows`` numbered within the window)."""
        self.pending.update(zip(rows, outs, strict=True))

    def batch_done(self) -> None:
        """A batch finished: commit if the interval is up, ``max_pending`` read-outs wait or a
        signal came; stop on one."""
        full = self.max_pending is not None and len(self.pending) >= self.max_pending
        if full or self.stop.requested or time.monotonic() - self.last >= self.seconds:
            self.commit()
        self.stop.check()

    def commit(self) -> None:
        """Write the read-outs waiting in memory, as runs of consecutive rows, and mark them
        complete (a signal meanwhile is only noted)."""
        if self.pending:
            with self.stop.now("defer"):
                rows = sorted(self.pending)
                batch: list[Run] = [
                    (self.start + a, self.stack([self.pending[r] for r in range(a, b)]))
                    for a, b in runs(rows)]
                self.writer.write_runs(batch)
                self.complete[[self.start + r for r in rows]] = True
                self.saved += len(rows)
                self.pending.clear()
        self.last = time.monotonic()

    @contextmanager
    def faults(self, partial: Path) -> Iterator[None]:
        """Run the block with signals finishing the batch; a stop (after saving what is
        finished), no space left or an I/O error becomes one line of what was saved."""
        try:
            with self.stop.now("finish"):
                yield
        except InterruptedRunError as e:
            try:
                self.commit()  # the batches finished before the signal
            except Exception as fault:  # told as a fault, if it is one
                self._raise_fault(fault, partial)
                raise
            line = stop_line(self.saved, self.total, partial)
            raise InterruptedRunError(line, e.signum) from None
        except Exception as e:
            self._raise_fault(e, partial)
            raise

    def _raise_fault(self, e: BaseException, partial: Path) -> None:
        """Raise ``e`` as one line if it is a storage fault (else return)."""
        kind = space.fault(e)
        if kind is not None:
            raise space.fault_error(
                kind, partial, f"after {self.saved} of {self.total} read-outs (kept in "
                f"{partial.name})", "rerun to resume") from None


def stopped_before(e: InterruptedRunError, partial: Path) -> InterruptedRunError:
    """The line of a run stopped before its first batch (loading, rendering, allocating):
    what ``partial`` holds from an earlier run, if anything."""
    saved = total = 0
    if partial.exists():
        try:
            complete = read_partial(partial).complete
            saved, total = int(complete.sum()), int(complete.size)
        except CacheFileError:  # one the rerun refuses or starts again: it says so then
            pass
    line = stop_line(saved, total, partial)
    return InterruptedRunError(f"stopped by {name(e.signum)}: {line}", e.signum)
