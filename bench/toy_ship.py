"""Train the shipped toys (``coin-toy``, ``mess3-toy``, ``rrxor-toy``) from scratch into
``belieflens/data/toys/<name>/`` with their configurations (``belieflens.train.toy.TOYS``) and
print each one's wall time (model set-up, training and saving).

A folder that already holds the finished toy of the same configuration is left as is unless
``--overwrite``; a killed run resumes from its checkpoint when rerun.
Run: ``.venv/bin/python -m bench.toy_ship [NAME ...] [--threads 2] [--overwrite]``.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Sequence

import torch

from belieflens.train.toy import CHECKPOINT, TOY_NAMES, TOYS, toy_dir, train


def main(argv: Sequence[str] | None = None) -> None:
    """Train each named toy (all by default) and print its time."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("toys", nargs="*", default=list(TOY_NAMES),
                    help="toys to train: " + ", ".join(TOY_NAMES) + " (default: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--overwrite", action="store_true", help="train again from scratch")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    unknown = [t for t in args.toys if t not in TOY_NAMES]
    if unknown:
        ap.error(f"unknown toy {unknown[0]!r}: choose from " + ", ".join(TOY_NAMES))
    torch.set_num_threads(args.threads)
    for name in args.toys:
        folder = toy_dir(name)
        if args.overwrite and folder.exists() and not (folder / CHECKPOINT).exists():
            shutil.rmtree(folder)
        t0 = time.perf_counter()
        result = train(TOYS[name], folder, threads=args.threads,
                       progress=not args.no_progress)
        wall = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        print(f"{name}: wall {wall:.1f} s (training loop {result.seconds:.1f} s, resumed from "
              f"step {result.resumed_from}); final loss {result.final_loss:.4f} vs optimal "
              f"{result.optimal:.4f}; folder {size:.2f} MB")


if __name__ == "__main__":
    main()
