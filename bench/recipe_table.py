"""The recipes tried on the coin flip's variants, side by side at one snapshot: for each
validation reading (a ``python -m bench.teach_curve`` results file), its base model's line and
the snapshot's line, per condition, as TVD to the oracle and updating slope in both deliveries
(multi-turn / single-turn). It reads only results files other commands wrote, so each number
keeps its own measuring command (listed in the note); it measures nothing itself.

Run: ``.venv/bin/python -m bench.recipe_table [--step 440] [--results NAME]
[LABEL=NAME ...]`` (NAME: a results file under ``docs/results``; default: the readings the
teaching page shows). Last line: the table's row count.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from belieflens import results
from belieflens.errors import ParameterError
from bench._lib import add_results_option, start_results

READINGS: tuple[tuple[str, str], ...] = (
    ("first recipe (SmolLM2-135M)", "teaching-curve-smollm2-135m-bayes"),
    ("stated priors three times, wider set", "teaching-curve-stated-heavy"),
    ("stated priors told as counts", "teaching-curve-counts"),
    ("first recipe on Qwen2.5-Coder-0.5B", "teaching-curve-qwen"),
    ("Qwen2.5-Coder-0.5B at a quarter of the rate", "teaching-curve-qwen-lr"),
    ("the prior read alone, 1,440 more trees (shipped)", "teaching-curve-drills"),
    ("the prior read alone, every mean 0.05-0.95", "teaching-curve-drills-means"),
    ("the prior read alone, told as counts", "teaching-curve-drills-counts"),
    ("the prior drills flipping three times", "teaching-curve-drills-turns"),
    ("the drills with a step loss", "teaching-curve-steploss"),
    ("the shipped recipe on Gemma-3-270m", "teaching-curve-gemma"),
    ("Gemma-3-270m at a quarter of the rate", "teaching-curve-gemma-lr"),
)
"""(label, results file) of each reading, the first recipe first."""

CONDITIONS: tuple[str, ...] = ("new-priors", "in-distribution", "new-sides")
DELIVERIES: tuple[str, ...] = ("multi-turn", "single-turn")


def _lines(rows: Sequence[Sequence[str]], model: str
           ) -> dict[tuple[str, str], tuple[str, str]]:
    """(condition, delivery) → (slope, TVD to the oracle) of one model's rows."""
    return {(r[1], r[2]): (r[3].split(" ± ")[0], r[4]) for r in rows if r[0] == model}


def table(readings: Sequence[tuple[str, Path]], step: int
          ) -> tuple[list[str], list[list[str]], list[str]]:
    """The columns, one row per reading and model line, and each reading's command."""
    columns = ["reading", "model"]
    for c in CONDITIONS:
        columns += [f"{c}: TVD to oracle", f"{c}: slope"]
    rows: list[list[str]] = []
    commands: list[str] = []
    snap = f"step-{step:05d}"
    for label, path in readings:
        res = results.load(path)
        commands.append(res.header.command)
        models = sorted({r[0] for r in res.rows})
        wanted = ["base"] + [m for m in models if snap in m.split()]
        if len(wanted) < 2:
            raise ParameterError(f"{path.name} has no line for {snap}")
        for model in wanted:
            got = _lines(res.rows, model)
            row = [label, "base" if model == "base" else snap]
            for c in CONDITIONS:
                pair = [got.get((c, d), ("–", "–")) for d in DELIVERIES]
                row += [" / ".join(p[1] for p in pair), " / ".join(p[0] for p in pair)]
            rows.append(row)
    return columns, rows, commands


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("readings", nargs="*", help="LABEL=NAME (a results file's name)")
    ap.add_argument("--step", type=int, default=440, help="the snapshot compared")
    add_results_option(ap)
    args = ap.parse_args(argv)
    # LABEL=NAME, or a NAME alone labelled by itself
    pairs = ([(r.partition("=")[0], r.partition("=")[2] or r) for r in args.readings]
             if args.readings else list(READINGS))
    rec = start_results(args, threads=1)
    folder = results.results_folder()
    readings = [(label, folder / f"{name}.json") for label, name in pairs]
    try:
        missing = [str(p) for _, p in readings if not p.exists()]
        if missing:
            raise ParameterError(f"no results file {', '.join(missing)}")
        columns, rows, commands = table(readings, args.step)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    note = (f"each cell multi-turn / single-turn, on the validation episodes (seed 101, taught "
            f"read-outs left out) at step {args.step} of the 1,320-step schedule; from the "
            "results files of: " + "; ".join(commands))
    if rec is not None:
        rec.write(args.results, columns, rows, note=note)
    else:
        for row in [columns, *rows]:
            print(" | ".join(row))
    print(f"{len(rows)} rows")


if __name__ == "__main__":
    main()
