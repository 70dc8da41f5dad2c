"""Wall time of the report's held-out probe fits with one BLAS thread (the default) against
the BLAS libraries' own thread count (the baseline), in the same run.

Data shaped like one layer of a study's probe task: ``--rows`` residual rows of the default
model's width (576), five outcomes, five folds grouped by episode, soft targets from a
planted linear map; the fit is :func:`belieflens.analysis.decoders.heldout.heldout_softmax`
with the report's settings (``lam=1e-2``, ``max_iter=200``). Each setting is timed
``--repeats`` times, alternating, and the medians are compared; the predictions of the two
settings are checked to agree.

Last line: ``fit_s_one_thread=... fit_s_default=... speedup_one_thread=...``.
Run: ``.venv/bin/python bench/probe_fit.py [--rows 2000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from belieflens.analysis.decoders import softmax
from belieflens.analysis.decoders.folds import group_folds
from belieflens.analysis.decoders.heldout import heldout_softmax


def problem(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x float32 [rows, 576], y [rows, 5] distributions, folds [rows])``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 576)).astype(np.float32)
    logits = x @ rng.normal(size=(576, 5)) / 30
    y = np.exp(logits - logits.max(axis=1, keepdims=True))
    folds = group_folds(np.arange(rows) // 70, 5, rng)
    return x, y / y.sum(axis=1, keepdims=True), folds


def timed(threads: int | None, x: np.ndarray, y: np.ndarray, folds: np.ndarray
          ) -> tuple[float, np.ndarray]:
    """Seconds of one held-out fit with ``threads`` BLAS threads (``None``: default)."""
    softmax.FIT_BLAS_THREADS = threads
    t0 = time.perf_counter()
    pred = heldout_softmax(x, y, folds, lam=1e-2, max_iter=200)
    return time.perf_counter() - t0, pred


def main() -> None:
    """Time both settings, alternating, and print the medians and their ratio."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    x, y, folds = problem(args.rows)
    one: list[float] = []
    default: list[float] = []
    for _ in range(args.repeats):
        s1, p1 = timed(1, x, y, folds)
        s0, p0 = timed(None, x, y, folds)
        one.append(s1)
        default.append(s0)
        gap = float(np.abs(p1 - p0).max())
        print(f"one thread {s1:.2f}s, default {s0:.2f}s, max |p1 - p0| {gap:.1e}", flush=True)
    a, b = statistics.median(one), statistics.median(default)
    print(f"fit_s_one_thread={a:.2f} fit_s_default={b:.2f} speedup_one_thread={b / a:.2f}")


if __name__ == "__main__":
    main()
