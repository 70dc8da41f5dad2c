"""Are two teach runs' training losses the same run? Their ``teach.json`` loss curves are
means over windows of ``loss_every`` steps, possibly different ones; both are averaged over
the windows of their least common multiple, over the steps both ran, and compared.

The question it answers: is an early-stopped adapter (``teach_ship --steps 198 --schedule
264``) the full run's snapshot at that step, when only the full run's ``teach.json`` is kept
(``git show REV:belieflens/data/adapters/NAME/teach.json > FILE``)? The curves are rounded to
five decimals, so equal runs differ by at most about 5e-6 per window.

Run: ``.venv/bin/python -m bench.teach_losses FIRST/teach.json SECOND/teach.json``
(a folder holding ``teach.json`` works too).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from belieflens.model.load import ADAPTER_INFO

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


def common_windows(first: Curve, second: Curve) -> tuple[int, np.ndarray, np.ndarray]:
    """Both curves averaged over windows of the least common multiple of their windows,
    over the whole windows both runs ran (a run's last window may be partial, and is left
    out): (window, first's means, second's means)."""
    (steps_a, every_a, a), (steps_b, every_b, b) = first, second
    window = math.lcm(every_a, every_b)
    n = min(steps_a, steps_b) // window
    means = [c[: n * window // e].reshape(n, window // e).mean(axis=1)
             for e, c in ((every_a, a), (every_b, b))]
    return window, means[0], means[1]


def main() -> int:
    """Print each common window's mean loss in both runs, then the largest difference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args()
    window, a, b = common_windows(curve(args.first), curve(args.second))
    print(f"steps      {args.first.name:>12} {args.second.name:>12}   difference")
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        print(f"{i * window + 1:>4}-{(i + 1) * window:<4} {x:12.5f} {y:12.5f}   {y - x:+.6f}")
    worst = float(np.abs(a - b).max()) if a.size else math.nan
    same = "the same run" if worst <= ROUNDING else "different runs"
    print(f"{a.size * window} steps in {a.size} windows of {window}: largest difference "
          f"{worst:.1e} ({same} to rounding, {ROUNDING:.0e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
