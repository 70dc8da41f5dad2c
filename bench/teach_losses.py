"""Are two teach runs' training losses the same run? Their ``teach.json`` loss curves are
means over windows of ``loss_every`` steps, possibly different ones; both are averaged over
the windows of their least common multiple, over the steps both ran, and compared.

The question it answers: is an early-stopped adapter (``teach_ship --steps 198 --schedule
264``) the full run's snapshot at that step, when only the full run's ``teach.json`` is kept
(``git show REV:belieflens/data/adapters/NAME/teach.json > FILE``)? The curves are rounded to
five decimals, so equal runs differ by at most about 5e-6 per window.

It also compares two recipes' training losses over the same steps: ``--window N`` (a
multiple of both runs' ``loss_every``) chooses the windows, ``--results NAME`` writes the
table for the docs.

Run: ``.venv/bin/python -m bench.teach_losses FIRST/teach.json SECOND/teach.json [--window N]
[--results NAME]`` (a folder holding ``teach.json`` works too).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from belieflens.model.load import ADAPTER_INFO
from bench._lib import add_results_option, start_results

#: The largest difference per window that rounding to five decimals can make.
ROUNDING = 1e-5


Curve = tuple[int, int, np.ndarray]


def curve(path: Path) -> Curve:
    """A teach run's (steps, ``loss_every``, ``loss_curve``) from its ``teach.json`` or its
    folder."""
    file = path / ADAPTER_INFO if path.is_dir() else path
    training = json.loads(file.read_text())["training"]
    return (int(training["steps"]), int(training["loss_every"]),
            np.asarray(training["loss_curve"], dtype=float))


def label(path: Path) -> str:
    """A run's name in the table: its folder's parent and name (``qwen/smollm2-135m-bayes``)."""
    folder = path if path.is_dir() else path.parent
    return f"{folder.parent.name}/{folder.name}"


def common_windows(first: Curve, second: Curve, window: int = 0
                   ) -> tuple[int, np.ndarray, np.ndarray]:
    """Both curves averaged over windows of ``window`` steps (default: the least common
    multiple of their windows; otherwise a multiple of it), over the whole windows both runs
    ran (a run's last window may be partial, and is left out): (window, first's means,
    second's means)."""
    (steps_a, every_a, a), (steps_b, every_b, b) = first, second
    least = math.lcm(every_a, every_b)
    if window % least:
        raise SystemExit(f"--window {window} is not a multiple of {least}, the runs' windows")
    window = window or least
    n = min(steps_a, steps_b) // window
    means = [c[: n * window // e].reshape(n, window // e).mean(axis=1)
             for e, c in ((every_a, a), (every_b, b))]
    return window, means[0], means[1]


def main() -> int:
    """Print each common window's mean loss in both runs, then the largest difference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--window", type=int, default=0, help="steps a window (0: the least "
                        "common multiple of the runs' windows)")
    add_results_option(parser)
    args = parser.parse_args()
    recorder = start_results(args, threads=1)
    window, a, b = common_windows(curve(args.first), curve(args.second), args.window)
    names = [label(p) for p in (args.first, args.second)]
    print(f"steps      {names[0]:>12} {names[1]:>12}   difference")
    rows = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        steps = f"{i * window + 1}-{(i + 1) * window}"
        rows.append([steps, f"{x:.4f}", f"{y:.4f}", f"{y - x:+.4f}"])
        print(f"{steps:<9} {x:12.5f} {y:12.5f}   {y - x:+.6f}")
    if recorder is not None:
        recorder.write(args.results, ["steps", *names, "difference"], rows,
                       note=f"mean training loss over windows of {window} steps, from each "
                            "run's teach.json")
    worst = float(np.abs(a - b).max()) if a.size else math.nan
    same = "the same run" if worst <= ROUNDING else "different runs"
    print(f"{a.size * window} steps in {a.size} windows of {window}: largest difference "
          f"{worst:.1e} ({same} to rounding, {ROUNDING:.0e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
