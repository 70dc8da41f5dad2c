"""Where ``analyze`` holds memory: RSS before, at the peak of, and after each stage.

A sampling thread reads this process's RSS every 2 ms; each stage of
:func:`belieflens.report.analysis.analyze` and :func:`belieflens.analysis.results.study_results`
(shard verification, open, output beliefs,
logit lens, decoder fits, plots) is wrapped to record the RSS when it starts, its peak and
the RSS when it returns (what it left held). glibc's malloc arenas are capped as the CLI caps
them (``--no-arena-limit``: not).

Run on a study directory written by ``bench/analysis_memory.py --keep DIR``:
``.venv/bin/python -m bench.analysis_stages DIR/study-4x OUT``.
Last line: ``peak_rss_mb=... start_rss_mb=...``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import dask

from belieflens.heap import limit_arenas

REPORT_STAGES = ("verify_file", "open_cache", "decoder_tvd", "output_beliefs", "turn_table",
                 "lens_beliefs", "lens_table", "summary", "position_bias", "reliability",
                 "trajectory_plot", "lens_heatmap", "source_heatmaps", "layer_profile_plot",
                 "position_bias_plot", "calibration_plot")
SUMMARY_STAGES = ("decoder_tvd", "lens_beliefs", "output_beliefs")


def rss_mb() -> float:
    """This process's resident set size now, in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


class Stages:
    """A peak sampler and the log of wrapped stages (name, before, peak, after, seconds)."""

    def __init__(self) -> None:
        self.peak = rss_mb()
        self.log: list[tuple[str, float, float, float, float]] = []
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mb())
            time.sleep(0.002)

    def wrap(self, module: ModuleType, name: str) -> None:
        """Replace ``module.name`` by a wrapper that logs its memory."""
        f: Callable[..., Any] = getattr(module, name)
        label = f"{module.__name__.rsplit('.', 1)[-1]}.{name}"

        @functools.wraps(f)
        def staged(*a: Any, **k: Any) -> Any:
            outer = self.peak  # the enclosing stage's running peak, kept across this one
            before = self.peak = rss_mb()
            t0 = time.perf_counter()
            out = f(*a, **k)
            after = rss_mb()
            top = max(self.peak, after)
            self.log.append((label, before, top, after, time.perf_counter() - t0))
            self.peak = max(outer, top)
            return out

        setattr(module, name, staged)


def main() -> None:
    """Analyse the study with every stage wrapped; print one line per stage call."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--scheduler", choices=("threads", "synchronous"), default="threads")
    ap.add_argument("--no-arena-limit", action="store_true",
                    help="leave glibc's malloc arenas unlimited (the CLI limits them)")
    args = ap.parse_args()
    if not args.no_arena_limit:
        limit_arenas()
    start = rss_mb()
    stages = Stages()
    # the modules, not the functions of the same names that belieflens.analysis exports
    report = importlib.import_module("belieflens.analysis.results")
    summary = importlib.import_module("belieflens.analysis.summary")
    entry = importlib.import_module("belieflens.report.analysis")

    for n in REPORT_STAGES:  # computing stages in analysis.results, the rest in report.analysis
        for module in (report, entry):
            if hasattr(module, n):
                stages.wrap(module, n)
    for n in SUMMARY_STAGES:
        stages.wrap(summary, n)
    peak = 0.0
    with dask.config.set(scheduler=args.scheduler):
        entry.analyze(args.study, args.out, decoders=True)
    for name, before, top, after, seconds in stages.log:
        peak = max(peak, top)
        print(f"{name:26s} before {before:6.0f}  peak {top:6.0f} (+{top - before:4.0f})  "
              f"after {after:6.0f}  {seconds:7.1f}s")
    print(f"peak_rss_mb={peak:.0f} start_rss_mb={start:.0f}")


if __name__ == "__main__":
    main()
