"""SIGINT and SIGTERM while a study runs: finish (or abandon) the current batch, save, stop.

:func:`handled` installs a handler for both signals in the main thread for the length of a
run (nested uses share it) and gives the run's :class:`Stop`. What a signal does depends on
where the run is (:attr:`Stop.mode`):

- ``"raise"`` (loading, allocating, analysing: the default):
  :class:`~belieflens.errors.InterruptedRunError` is raised at once, and whatever was being
  written cleans up on its way out;
- ``"finish"`` (computing a batch of read-outs): the first signal is only noted: the run
  finishes the batch, saves what is complete and stops itself (:meth:`Stop.check`); a second
  signal raises at once, abandoning the batch;
- ``"defer"`` (saving): the signal is only noted.

A run in another thread (a Dask worker's task) cannot be raised into. Its process's main
thread installs the handler with ``raising=False`` (:func:`install`, from the worker's event
loop): a signal is only noted, which the run checks after each batch, and a second one is
handed to the handler that was there before (the worker stops at once).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Literal

from belieflens.errors import InterruptedRunError

SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""The signals a run handles: Ctrl-C and a scheduler's pre-emption."""

Mode = Literal["raise", "finish", "defer"]
"""What a signal does now (see the module's docstring)."""

Handlers = dict[int, Any]
"""The handlers a signal had before :func:`install`, by signal number."""


def name(signum: int) -> str:
    """``'SIGTERM'`` for 15."""
    return signal.Signals(signum).name


class Stop:
    """A run's stop request: the signal that came (``None``: none yet) and what one does now."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.mode: Mode = "raise"
        self.raising = True
        """Whether the handler may raise (only in the thread that runs the work)."""
        self.previous: Handlers = {}

    @property
    def requested(self) -> bool:
        """Whether a signal came."""
        return self.signum is not None

    def reset(self) -> None:
        """No signal yet, in mode ``raise``."""
        self.signum, self.count, self.mode = None, 0, "raise"

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: note the signal, and raise or hand it on as the mode says."""
        self.signum = signum
        self.count += 1
        if not self.raising:
            if self.count > 1:  # a second signal: the process goes now, as it would have
                signal.signal(signum, self.previous.get(signum, signal.SIG_DFL))
                os.kill(os.getpid(), signum)
            return
        if self.mode == "raise" or (self.mode == "finish" and self.count > 1):
            raise InterruptedRunError(f"stopped by {name(signum)}", signum)

    def check(self) -> None:
        """Raise :class:`InterruptedRunError` if a signal came."""
        if self.signum is not None:
            raise InterruptedRunError(f"stopped by {name(self.signum)}", self.signum)

    @contextmanager
    def now(self, mode: Mode) -> Iterator[None]:
        """Handle signals in ``mode`` for the block (the mode before is restored after)."""
        before, self.mode = self.mode, mode
        try:
            yield
        finally:
            self.mode = before


STOP = Stop()
"""This process's stop request: one per process, as signals are."""

_depth = [0]


def install(stop: Stop, *, raising: bool = True) -> Handlers:
    """Make ``stop`` the handler of SIGINT and SIGTERM (call in the main thread); the handlers
    before, for :func:`restore`. ``raising=False``: the handler only notes a signal."""
    stop.reset()
    stop.raising = raising
    stop.previous = {int(s): signal.signal(s, stop.handle) for s in SIGNALS}
    return stop.previous


def restore(previous: Handlers) -> None:
    """Give the signals back the handlers :func:`install` found."""
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@contextmanager
def handled() -> Iterator[Stop]:
    """The process's :class:`Stop`, SIGINT and SIGTERM handled by it for the block (in the
    main thread; nested blocks share one installation). In another thread nothing is
    installed here: a Dask worker's main thread installs the handler (:func:`install`)."""
    if threading.current_thread() is not threading.main_thread():
        yield STOP
        return
    previous = install(STOP) if _depth[0] == 0 else {}
    _depth[0] += 1
    try:
        yield STOP
    finally:
        _depth[0] -= 1
        if _depth[0] == 0:
            restore(previous)
            STOP.reset()
