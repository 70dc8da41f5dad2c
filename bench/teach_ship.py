"""Teach the shipped adapters (``smollm2-135m-bayes``, ``smollm2-135m-bayes-0.3``) from
scratch into ``belieflens/data/adapters/<name>/`` with their configurations
(``belieflens.train.teach.SHIPPED``); print each one's wall and CPU time, peak memory, size
and loss curve.

A folder holding the finished adapter of the same configuration is left as is unless
``--overwrite``; a killed run resumes from its checkpoint when rerun. ``--snapshots DIR``
keeps the adapters' weights every 25 steps (``--snapshot-every``) under ``DIR/<name>/`` (for
the learning curve, ``bench.teach_curve``). ``--episodes``, ``--steps``, ``--batch``,
``--layers``, ``--rank``, ``--lr``, ``--schedule`` and ``--weigh`` change the shipped recipe
for an experiment; they need ``--dest``, so that the package's adapters are only ever the
shipped configurations. ``--steps N`` alone is a whole N-step run (its decay spans its own
steps), ``--steps N --schedule M`` stops an M-step run at step N. ``--prior-drills 0`` is the
first recipe's mix, without the drills that teach the stated prior read alone;
``--drill-turns 3`` makes each drill flip three times after the prior instead of once;
``--step-loss 1`` adds the step loss (``TeachConfig.step_loss``) beside the KL.
Run: ``.venv/bin/python -m bench.teach_ship [NAME ...] [--threads 1] [--snapshots DIR]
[--dest DIR] [--model NAME --episodes N --steps N --batch N --layers 20-29 --rank 8 --lr 1e-3
--schedule 264 --weigh question --stated-copies 3 --stated-priors MEANS/WEIGHTS --stated-as counts
--prior-drills 120 --drill-turns 3 --step-loss 1]
[--results NAME]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from belieflens.errors import InterruptedRunError, ParameterError
from belieflens.model.load import adapter_folder
from belieflens.train.teach import (
    CHECKPOINT,
    COIN_FLIP_MIX,
    PRIOR_DRILLS,
    SHIPPED,
    WEIGHS,
    Progress,
    TeachConfig,
    parse_layers,
    peak_rss_mb,
    prior_drills,
    teach,
)
from bench._lib import add_results_option, start_results

SHIPPED_MIX: tuple[object, ...] = (1, None, "share", None, 1)
"""The mix options' values that keep the shipped mix: :func:`mix_options`."""


def mix_options(args: argparse.Namespace) -> tuple[object, ...]:
    """The options that change the mix: ``--stated-copies``, ``--stated-priors``,
    ``--stated-as``, ``--prior-drills`` and ``--drill-turns``."""
    return (args.stated_copies, args.stated_priors, args.stated_as, args.prior_drills,
            args.drill_turns)


def recipe(name: str, args: argparse.Namespace) -> TeachConfig:
    """The shipped configuration ``name`` with the options' changes. ``--steps`` without
    ``--schedule`` is a whole run: its decay spans its own steps (the S = 0.3 adapter's
    ``schedule=264`` is not kept, so ``--steps 264`` is the full run it was stopped from)."""
    schedule = 0 if args.steps is not None and args.schedule is None else args.schedule
    changes: dict[str, object] = {k: v for k, v in (
        ("model", args.model), ("episodes", args.episodes), ("steps", args.steps),
        ("weigh", args.weigh), ("step_loss", args.step_loss),
        ("batch", args.batch), ("rank", args.rank), ("lr", args.lr), ("schedule", schedule),
        ("alpha", None if args.rank is None else 2.0 * args.rank),  # the shipped scale, 2
        ("layers", parse_layers(args.layers) if args.layers else None)) if v is not None}
    config = dataclasses.replace(SHIPPED[name], **changes)  # type: ignore[arg-type]
    if mix_options(args) == SHIPPED_MIX:
        return config
    drills = len(config.mix) - len(COIN_FLIP_MIX)  # the configuration's own prior drills
    assert config.mix == COIN_FLIP_MIX + prior_drills(drills)
    return dataclasses.replace(config, mix=stated_mix(
        COIN_FLIP_MIX, args.stated_copies, args.stated_priors, args.stated_as,
        drills if args.prior_drills is None else args.prior_drills, args.drill_turns))


def stated_mix(mix: Sequence[tuple[tuple[str, Any], ...]], copies: int,
               priors: str | None, form: str = "share", drills: int = 0,
               drill_turns: int = 1) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """``mix`` with each stated-prior condition taught ``copies`` times (each copy at its own
    seed, as every condition of a mix is) and, with ``priors`` (``MEANS/WEIGHTS``), its priors
    drawn from those means and weights; ``form`` other than ``share``: told in that form
    (the coin flip's ``stated_as``). ``drills`` more conditions
    (:func:`~belieflens.train.teach.prior_drills`, each at its own seed) state a prior and flip
    ``drill_turns`` times (shipped: once, so that half their read-outs are the prior read
    alone, before any flip).

    Examples:
        >>> mix = ((("prior", "unstated"),), (("prior", "stated"),))
        >>> [dict(c) for c in stated_mix(mix, 2, "0.3,0.7/2,5")]  # doctest: +NORMALIZE_WHITESPACE
        [{'prior': 'unstated'},
         {'prior': 'stated', 'prior_means': '0.3,0.7', 'prior_weights': '2,5'},
         {'prior': 'stated', 'prior_means': '0.3,0.7', 'prior_weights': '2,5'}]
        >>> [dict(c)["sides"] for c in stated_mix(mix, 1, None, drills=3)[2:]]
        ['heads-tails', 'random', 'heads-tails']
    """
    out: tuple[tuple[tuple[str, Any], ...], ...] = tuple(
        c for c in mix for _ in range(copies if dict(c).get("prior") == "stated" else 1)
    ) + prior_drills(drills, drill_turns)
    extra: dict[str, str] = {}
    if priors is not None:
        means, _, weights = priors.partition("/")
        extra = {"prior_means": means, "prior_weights": weights}
    if form != "share":
        extra["stated_as"] = form
    if not extra:
        return out
    return tuple(tuple(sorted({**dict(c), **extra}.items()))
                 if dict(c).get("prior") == "stated" else c for c in out)


COLUMNS = ("adapter", "base", "target", "LoRA", "training data", "steps", "wall time", "CPU time",
           "peak memory", "final loss", "size")


def row(name: str, info: dict[str, Any], size_mb: float) -> list[str]:
    """One adapter's line of the results table, from its ``teach.json``."""
    o, tr = info["options"], info["training"]
    blocks = o["layers"]
    return [f"`{name}`", f"`{info['base']['spec']}`", info["target"],
            f"rank {o['rank']} (alpha {o['alpha']:g}) on blocks {blocks[0]}-{blocks[-1]}",
            f"{len(info['conditions'])} conditions x {o['episodes']} episodes: "
            f"{tr['trees']:,} trees, {tr['readouts']:,} read-outs",
            f"{tr['steps']} of {o['batch']} trees, Adam {o['lr']:g}",
            f"{tr['seconds']:,.0f} s", f"{tr['cpu_seconds']:,.0f} s",
            f"{tr['peak_rss_mb'] / 1024:.2f} GB", f"{tr['final_loss']:.4f}",
            f"{size_mb:.1f} MB"]


def main(argv: Sequence[str] | None = None) -> None:
    """Teach each named adapter (all by default) and print what it cost."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("names", nargs="*", default=list(SHIPPED),
                    help="adapters: " + ", ".join(SHIPPED) + " (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--overwrite", action="store_true", help="teach again from scratch")
    ap.add_argument("--snapshots", type=Path, default=None)
    ap.add_argument("--snapshot-every", type=int, default=25)
    ap.add_argument("--dest", type=Path, default=None,
                    help="write DEST/<name>/ instead of the package's folder")
    ap.add_argument("--model", default=None, help="an experiment: another base model (an "
                    "embedded name; give its --layers)")
    ap.add_argument("--episodes", type=int, default=None, help="an experiment: training "
                    "episodes instead of the shipped recipe's (needs --dest)")
    ap.add_argument("--steps", type=int, default=None, help="an experiment: steps (the "
                    "decay spans them unless --schedule)")
    ap.add_argument("--batch", type=int, default=None, help="an experiment: trees per step")
    ap.add_argument("--layers", default=None, help="an experiment: adapted blocks (20-29)")
    ap.add_argument("--rank", type=int, default=None,
                    help="an experiment: LoRA's rank (alpha twice it, as shipped)")
    ap.add_argument("--lr", type=float, default=None,
                    help="an experiment: Adam's peak learning rate (cosine decay to a tenth)")
    ap.add_argument("--schedule", type=int, default=None,
                    help="an experiment: the steps the decay spans (above --steps: stop early)")
    ap.add_argument("--weigh", choices=WEIGHS, default=None, help="an experiment: the loss's "
                    "weight per read-out")
    ap.add_argument("--step-loss", type=float, default=None, help="an experiment: the "
                    "weight of the step loss beside the KL (each read-out's turn-to-turn step "
                    "against its target's; shipped: 0)")
    ap.add_argument("--stated-copies", type=int, default=1, help="an experiment: each "
                    "stated-prior condition taught this many times, each at its own seed")
    ap.add_argument("--stated-priors", default=None, help="an experiment: the stated "
                    "priors taught, MEANS/WEIGHTS (0.3,0.7/2,5)")
    ap.add_argument("--stated-as", choices=("share", "counts"), default="share",
                    help="an experiment: how the stated priors taught are told")
    ap.add_argument("--prior-drills", type=int, default=None, help="an experiment: this "
                    "many conditions that state a prior and flip --drill-turns times "
                    f"beside the 40 of the mix (shipped: {PRIOR_DRILLS} for S = 1, 0 for "
                    "S = 0.3; 0: the first recipe's mix)")
    ap.add_argument("--drill-turns", type=int, default=1, help="an experiment: the flips "
                    "after the stated prior in each prior drill (shipped: 1)")
    add_results_option(ap)
    args = ap.parse_args(argv)
    recorder = start_results(args)
    table: list[list[str]] = []
    unknown = [n for n in args.names if n not in SHIPPED]
    if unknown:
        ap.error(f"unknown adapter {unknown[0]!r}: choose from " + ", ".join(SHIPPED))
    changed = any(v is not None for v in (args.model, args.episodes, args.steps, args.batch,
                                          args.layers, args.weigh, args.rank, args.lr,
                                          args.schedule, args.step_loss)) or \
        mix_options(args) != SHIPPED_MIX
    if changed and args.dest is None:
        ap.error("--model, --episodes, --steps, --batch, --layers, --rank, --lr, --schedule, "
                 "--weigh, --step-loss and --stated-* change the recipe: give --dest")
    for name in args.names:
        folder = adapter_folder(name) if args.dest is None else args.dest / name
        if args.overwrite and folder.exists() and not (folder / CHECKPOINT).exists():
            shutil.rmtree(folder)

        def report(p: Progress, name: str = name) -> None:
            print(f"{name} step {p.step}/{p.steps} loss {p.loss:.4f} "
                  f"({p.seconds:.0f} s)", flush=True)

        t0 = time.perf_counter()
        snaps = None if args.snapshots is None else args.snapshots / name
        try:
            result = teach(recipe(name, args), folder, threads=args.threads, on_step=report,
                           snapshots=snaps, snapshot_every=args.snapshot_every)
        except InterruptedRunError as e:  # the checkpoint is saved: one line, 130 or 143
            print(f"interrupted: {e}", file=sys.stderr)
            raise SystemExit(e.exit_code) from None
        except ParameterError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        tr = result.info["training"]
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        print(f"{name}: wall {time.perf_counter() - t0:.1f} s; training {tr['seconds']} s "
              f"wall, {tr['cpu_seconds']} s CPU; peak RSS {tr['peak_rss_mb']} MB (this "
              f"process: {peak_rss_mb():.0f} MB); final loss {tr['final_loss']}; folder "
              f"{size:.2f} MB; loss every {tr['loss_every']} steps: {tr['loss_curve']}",
              flush=True)
        table.append(row(name, result.info, size))
    if recorder is not None:
        recorder.write(args.results, COLUMNS, table, note="each adapter's own teach.json: "
                       "training time, CPU time and peak memory of its training loop")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
