"""Train the shipped toys (``coin-toy``, ``mess3-toy``, ``rrxor-toy``) from scratch into
``belieflens/data/toys/<name>/`` with their configurations (``belieflens.train.toy.TOYS``) and
print each one's wall time (model set-up, training and saving).

``--seed S`` trains the same recipe from another seed (initial weights and every batch) into
``belieflens/data/toys/seeds/<name>-seed<S>/`` (or ``--out DIR/<name>-seed<S>``): the other
seeds whose spread ``bench/toy_gates.py`` reports. A folder that already holds the finished
toy of the same configuration is left as is unless ``--overwrite``; a killed run resumes from
its checkpoint when rerun. ``--steps N`` or ``--horizon K`` (with ``--out``) trains the recipe
for another number of steps, or with another training horizon (``ToyConfig.horizon``), for an
experiment.
Run: ``.venv/bin/python -m bench.toy_ship [NAME ...] [--seed S] [--threads 2] [--overwrite]
[--steps N] [--horizon K] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from belieflens.errors import ParameterError
from belieflens.train.toy import CHECKPOINT, TOY_NAMES, TOYS, ToyName, toy_dir, train


def folder_of(name: ToyName, seed: int, out: Path | None) -> Path:
    """Where the toy ``name`` trained from ``seed`` goes: the shipped folder for the shipped
    seed, else ``<name>-seed<S>`` under ``out`` (default ``belieflens/data/toys/seeds``)."""
    if seed == TOYS[name].seed and out is None:
        return toy_dir(name)
    base = out if out is not None else toy_dir(name).parent / "seeds"
    return base / f"{name}-seed{seed}"


def main(argv: Sequence[str] | None = None) -> None:
    """Train each named toy (all by default) and print its time."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("toys", nargs="*", default=list(TOY_NAMES),
                    help="toys to train: " + ", ".join(TOY_NAMES) + " (default: all)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the initial weights and batches (0: the shipped toys)")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for other seeds' toys (default belieflens/data/toys/seeds)")
    ap.add_argument("--steps", type=int, default=None,
                    help="an experiment: steps instead of the recipe's (needs --out)")
    ap.add_argument("--horizon", type=int, default=None,
                    help="an experiment: training horizon instead of the recipe's (needs --out)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--overwrite", action="store_true", help="train again from scratch")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    unknown = [t for t in args.toys if t not in TOY_NAMES]
    if unknown:
        ap.error(f"unknown toy {unknown[0]!r}: choose from " + ", ".join(TOY_NAMES))
    if (args.steps is not None or args.horizon is not None) and args.out is None:
        ap.error("--steps and --horizon change the recipe: give --out")
    torch.set_num_threads(args.threads)
    for name in args.toys:
        folder = folder_of(name, args.seed, args.out)
        if args.overwrite and folder.exists() and not (folder / CHECKPOINT).exists():
            shutil.rmtree(folder)
        t0 = time.perf_counter()
        recipe = TOYS[name]
        try:
            config = dataclasses.replace(
                recipe, seed=args.seed, steps=recipe.steps if args.steps is None else args.steps,
                horizon=recipe.horizon if args.horizon is None else args.horizon)
        except ParameterError as e:  # e.g. --horizon 2 on coin-toy: one line, exit 2
            ap.error(str(e))
        result = train(config, folder, threads=args.threads, progress=not args.no_progress)
        wall = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        print(f"{name} seed {args.seed}: wall {wall:.1f} s (training loop {result.seconds:.1f} "
              f"s, resumed from step {result.resumed_from}); final loss "
              f"{result.final_loss:.4f} vs optimal {result.optimal:.4f}; folder {folder} "
              f"{size:.2f} MB", flush=True)


if __name__ == "__main__":
    main()
