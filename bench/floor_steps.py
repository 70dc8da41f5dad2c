"""Each step toward the compute floor, measured against the old path in the same run.

The radix-tree runner (:func:`belieflens.run.trie_runner.run_trie`) runs one
workload (coin flip, multi-turn, both probes, every rotation; or ``--env`` a
revealed-belief grid, every prompt and rotation) under the settings below,
in rotating order, ``--rounds`` times each:

- ``base``: the bridge's eager attention, ``DynamicCache`` concatenation, the
  capture hooks registered on every forward call (``run_with_hooks``) — the old path;
- ``sdpa``: attention through PyTorch SDPA (:mod:`belieflens.model.attention`);
- ``prealloc``: SDPA, and each call's cache allocated once (new keys written in place);
- ``hooks``: SDPA, preallocation, and the hooks attached once per run;
- ``rows64``: all of these, and batches of up to 64 rows instead of 16 (fewer, larger
  calls: each call streams every weight once, plus the bridge's per-call overhead);
- ``packed``: SDPA, preallocation, hooks once, 16 rows, and the tree's edges packed into
  rows of up to 128 tokens under a tree mask (the others above run an edge per row);
- ``norms``: all of ``packed``, and the bridge's norms run as their HF modules alone,
  without the bridge's recomputation for scale/normalized hooks
  (:mod:`belieflens.model.norms`): extraction's default. Every setting before it runs
  the bridge's own norms.

It prints each setting's median wall time, its speedup over ``base`` and the largest
difference of any option log-prob from ``base``. Then the per-call cost of the
hooks alone: a forward of 1 x 8 tokens without hooks, with the 31 capture hooks
added per call by ``run_with_hooks``, and with them attached once (medians,
alternating).

Last line: ``speedup_sdpa=... speedup_prealloc=... speedup_hooks=... speedup_rows64=...
speedup_packed=... speedup_norms=... norms_vs_packed=... hook_ms_per_call=...
hook_once_ms_per_call=... max_dlogp=...``
(speedups over ``base``).
Run: ``.venv/bin/python bench/floor_steps.py [--episodes 2 --turns 6 --rounds 2]``, or
``--env preference --episodes 72`` for the grid; ``--clock cpu --threads 1`` on a
shared machine (``bench/clock.py``).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import clock
import numpy as np
import torch
from extract import bench_env, queries

from belieflens.model.load import LoadedModel, load
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.rows import resid_hook_names
from belieflens.run.trie_runner import run_trie


def _setting(attention: str, prealloc: bool, hooks_once: bool, max_rows: int = 16,
             row_tokens: int = 0, norms: bool = False) -> dict[str, Any]:
    """One setting of :func:`run_trie`'s steps toward the floor."""
    return {"attention": attention, "prealloc": prealloc, "hooks_once": hooks_once,
            "max_rows": max_rows, "row_tokens": row_tokens, "norms": norms}


SETTINGS: dict[str, dict[str, Any]] = {
    "base": _setting("eager", False, False),
    "sdpa": _setting("sdpa", False, False),
    "prealloc": _setting("sdpa", True, False),
    "hooks": _setting("sdpa", True, True),
    "rows64": _setting("sdpa", True, True, max_rows=64),
    "packed": _setting("sdpa", True, True, row_tokens=128),
    "norms": _setting("sdpa", True, True, row_tokens=128, norms=True),
}


def run(model: LoadedModel, tqs: list[TokenizedQuery], setting: dict[str, Any]
        ) -> tuple[float, np.ndarray]:
    """Seconds for one run of ``tqs`` and every option log-prob, in query order."""
    lp: list[np.ndarray | None] = [None] * len(tqs)
    t0 = clock.now()
    for batch, outs, _ in run_trie(model, tqs, max_tokens=8192, **setting):
        for q, o in zip(batch, outs, strict=True):
            lp[q] = o.option_logprob
    wall = clock.now() - t0
    return wall, np.concatenate([x for x in lp if x is not None])


def hook_cost(model: LoadedModel, repeat: int) -> tuple[float, float, float]:
    """Median seconds of a 1 x 8 forward: no hooks, hooks per call, hooks attached once."""
    bridge = model.bridge
    names = resid_hook_names(model.info.n_layers)
    sink: dict[int, Any] = {}

    def make(i: int) -> Any:
        def hook(t: Any, hook: Any) -> Any:
            sink[i] = t[:, -1].detach().float().cpu()
            return t

        return hook

    hooks = [(n, make(i)) for i, n in enumerate(names)]
    ids = torch.randint(0, model.info.vocab_size, (1, 8),
                        generator=torch.Generator().manual_seed(0))
    none, per_call, once = [], [], []
    with torch.inference_mode():
        bridge(ids, logits_to_keep=1)
        for _ in range(repeat):
            t0 = clock.now()
            bridge(ids, logits_to_keep=1)
            t1 = clock.now()
            bridge.run_with_hooks(ids, fwd_hooks=hooks, logits_to_keep=1)
            t2 = clock.now()
            with bridge.hooks(fwd_hooks=hooks):
                t3 = clock.now()
                bridge(ids, logits_to_keep=1)
                t4 = clock.now()
            none.append(t1 - t0)
            per_call.append(t2 - t1)
            once.append(t4 - t3)
    return statistics.median(none), statistics.median(per_call), statistics.median(once)


def main() -> None:
    """Run the settings in rotating order and print the speedups."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="coin-flip", help="coin-flip, or a revealed-belief grid")
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--hook-repeat", type=int, default=30)
    clock.add_options(ap)
    ap.add_argument("--kernels", default="auto")
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS),
                    help="settings to run (base always runs: the speedups are over it)")
    args = ap.parse_args()
    clock.apply(args)
    model = load("smollm2-135m", kernels=args.kernels)
    tqs = queries(model, bench_env(args.env, args.turns), args.episodes)
    print(f"workload: {len(tqs)} queries; kernels={model.info.kernels} clock={args.clock} "
          f"threads={torch.get_num_threads()}")
    names = ["base", *(n for n in SETTINGS if n in args.settings and n != "base")]
    walls: dict[str, list[float]] = {n: [] for n in names}
    lps: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        for n in names[r % len(names):] + names[: r % len(names)]:
            wall, lp = run(model, tqs, SETTINGS[n])
            walls[n].append(wall)
            lps[n] = lp
            print(f"round {r} {n}: {wall:.1f}s")
    med = {n: statistics.median(w) for n, w in walls.items()}
    dlp = {n: float(np.abs(lps[n] - lps["base"]).max()) for n in names}
    for n in names:
        print(f"{n:9s} median {med[n]:.1f}s  speedup {med['base'] / med[n]:.2f}  "
              f"max |d option log-prob| vs base {dlp[n]:.1e}")
    none, per_call, once = hook_cost(model, args.hook_repeat)
    print(f"1x8 forward: no hooks {1e3 * none:.1f} ms, 31 hooks per call "
          f"{1e3 * per_call:.1f} ms, attached once {1e3 * once:.1f} ms")
    print(" ".join(f"speedup_{n}={med['base'] / med[n]:.2f}" for n in names[1:]) + " "
          + (f"norms_vs_packed={med['norms'] / med['packed']:.2f} "
             if {"norms", "packed"} <= set(med) else "") +
          f"hook_ms_per_call={1e3 * (per_call - none):.1f} "
          f"hook_once_ms_per_call={1e3 * (once - none):.1f} max_dlogp={max(dlp.values()):.1e}")


if __name__ == "__main__":
    main()
