"""Peak memory and wall time of one held-out probe fit streamed in blocks of
:data:`~belieflens.analysis.decoders.heldout.BLOCK_ROWS` rows (the default) against blocks
of 4,096 rows (the baseline, the earlier default), at two row counts, in the same run.

Each (block, rows) fit runs in its own child process (this script with ``--child``), so
that its peak is its own: the child builds the problem of :mod:`bench.probe_fit` (float32
rows of width 576, five outcomes, five folds grouped by episode), resets the kernel's
high-water mark (``/proc/self/clear_refs``), fits with the report's settings
(``lam=1e-2``, ``max_iter=200``) and prints its peak growth over the resident size it had
before the fit. The predictions of both block sizes are checked to agree.

Last line: ``growth_mb_default=A/B growth_mb_baseline=C/D fit_s_default=... fit_s_baseline=...
time_ratio_default_vs_baseline=... max_dp=...`` (A/B: at the smaller/larger row count).
Run: ``.venv/bin/python bench/probe_block.py [--rows 2000 8000]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

BASELINE_BLOCK = 4096


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(rows: int, block: int, out: str) -> None:
    """One fit: write its peak growth (MiB), seconds and predictions to ``out`` (.npz)."""
    from probe_fit import problem

    from belieflens.analysis.decoders.heldout import heldout_softmax
    from belieflens.analysis.decoders.softmax import FIT_BLAS_LIMIT
    from belieflens.heap import limit_arenas

    limit_arenas()
    x, y, folds = problem(rows)
    import scipy.optimize  # noqa: F401  (imported before the mark: not the fit's memory)

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident size
    before = _status_mb("VmRSS")
    t0 = time.perf_counter()
    with FIT_BLAS_LIMIT:
        pred = heldout_softmax(x, y, folds, lam=1e-2, max_iter=200, block=block)
    secs = time.perf_counter() - t0
    np.savez(out, pred=pred, growth=_status_mb("VmHWM") - before, secs=secs)


def run(rows: int, block: int, tmp: Path) -> tuple[float, float, np.ndarray]:
    """Run one child; what it measured: ``(growth MiB, seconds, predictions)``."""
    out = tmp / f"r{rows}-b{block}.npz"
    subprocess.run([sys.executable, __file__, "--child", str(rows), str(block), str(out)],
                   check=True)
    got = np.load(out)
    return float(got["growth"]), float(got["secs"]), got["pred"]


def main() -> None:
    """Fit each row count with both block sizes and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs=2, default=[2000, 8000])
    ap.add_argument("--child", nargs=3, metavar=("ROWS", "BLOCK", "OUT"))
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), int(args.child[1]), args.child[2])
        return
    import tempfile

    from belieflens.analysis.decoders.heldout import BLOCK_ROWS

    res: dict[tuple[int, int], tuple[float, float, np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as d:
        for rows in args.rows:
            for block in (BLOCK_ROWS, BASELINE_BLOCK):
                res[rows, block] = r = run(rows, block, Path(d))
                print(json.dumps({"rows": rows, "block": block, "growth_mb": round(r[0], 1),
                                  "fit_s": round(r[1], 2)}), flush=True)
    gap = max(float(np.abs(res[n, BLOCK_ROWS][2] - res[n, BASELINE_BLOCK][2]).max())
              for n in args.rows)

    def growth(block: int) -> str:
        return "/".join(f"{res[n, block][0]:.0f}" for n in args.rows)

    def secs(block: int) -> float:
        return sum(res[n, block][1] for n in args.rows)

    print(f"growth_mb_default={growth(BLOCK_ROWS)} growth_mb_baseline={growth(BASELINE_BLOCK)} "
          f"fit_s_default={secs(BLOCK_ROWS):.2f} fit_s_baseline={secs(BASELINE_BLOCK):.2f} "
          f"time_ratio_default_vs_baseline={secs(BLOCK_ROWS) / secs(BASELINE_BLOCK):.2f} "
          f"max_dp={gap:.1e}")


if __name__ == "__main__":
    main()
