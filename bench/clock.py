"""The clock a benchmark reads: wall time, or the CPU time of this process.

On a machine shared with other jobs, wall times of the same work vary by 2-3x
(other processes take the cores). The process's CPU time (``time.process_time``,
all its threads) counts only the work this process did; with ``--threads 1`` no
thread waits spinning for a descheduled sibling either, so ratios of CPU times
stay meaningful there. ``--clock cpu`` in ``bench/extract.py`` and
``bench/floor_steps.py`` selects it; every time those scripts print is then
CPU seconds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
_now: list[Callable[[], float]] = [time.perf_counter]


def use(name: str) -> None:
    """Read ``name`` (``wall`` or ``cpu``) from now on."""
    _now[0] = CLOCKS[name]


def now() -> float:
    """The selected clock's reading, in seconds."""
    return _now[0]()


def add_options(ap: argparse.ArgumentParser) -> None:
    """Add ``--threads`` and ``--clock`` to a benchmark's parser."""
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall time, or this process's CPU time (a shared machine)")


def apply(args: argparse.Namespace) -> None:
    """Set torch's thread count and the clock from the options of :func:`add_options`."""
    import torch

    torch.set_num_threads(args.threads)
    use(args.clock)
