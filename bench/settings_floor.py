"""Extraction settings against the compute floor, the floor measured between the runs.

``bench/extract.py`` measures the floor (f) once, as the best of three 512-token
forwards: on a machine whose speed drifts by 10-20% from minute to minute it catches
one moment while an extraction spans minutes, and the ratio moves with the drift. Here
the floor is measured again before every run (best of ``--floor-repeat`` forwards of 4 x
128 fresh tokens on the plain transformers model, PyTorch's default kernels, as
``bench/extract.py`` defines it), and each run's ratio is its time over the unique tokens
at the floor rate measured next to it; the medians over ``--rounds`` rounds (settings in
rotating order) are printed.

The runs are :func:`belieflens.run.trie_runner.run_trie` over one workload (coin flip,
multi-turn, both probes, every rotation; or ``--env`` a revealed-belief grid), in the
extraction's own window of 1,024 queries, under these settings:

- ``current``: extraction's defaults (packed rows of 128 tokens, 16 rows and 8,192 tokens
  per call, the kernels ``--kernels auto`` resolves to here);
- ``mkl``: the same with PyTorch's default linear kernels (MKL on Intel);
- ``onednn``: the same with oneDNN's linear;
- ``t2048``: calls of at most 2,048 padded tokens (smaller activations per call);
- ``r8``: calls of at most 8 rows;
- ``r32``, ``r64``: calls of up to 32 rows (16,384 tokens) or 64 rows (32,768 tokens),
  larger products for more threads to share.

Every setting's largest option log-prob difference from ``current`` is printed too.
Last line: ``ratio_<setting>=...`` for each setting (median run time over the floor).
Run: ``.venv/bin/python bench/settings_floor.py [--env choice --episodes 15] --threads 1
--clock cpu [--settings current r32 ...]``.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import clock
import numpy as np
import torch
from extract import bench_env, floor_rate, queries

from belieflens.model.kernels import resolve_kernels, use_kernels
from belieflens.model.load import LoadedModel, load
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.extract import ExtractOptions
from belieflens.run.resume import windows
from belieflens.run.rows import forward_rows
from belieflens.run.trie import build
from belieflens.run.trie_runner import run_trie
from belieflens.types import KernelName

SETTINGS: dict[str, dict[str, Any]] = {
    "current": {"kernels": "auto"},
    "mkl": {"kernels": "default"},
    "onednn": {"kernels": "onednn"},
    "t2048": {"kernels": "auto", "max_tokens": 2048},
    "r8": {"kernels": "auto", "max_rows": 8},
    "r32": {"kernels": "auto", "max_rows": 32, "max_tokens": 16384},
    "r64": {"kernels": "auto", "max_rows": 64, "max_tokens": 32768},
}


def set_kernels(model: LoadedModel, kernels: KernelName) -> None:
    """Route the model's linear layers through ``kernels`` (undoing any earlier routing)."""
    hf = model.bridge.original_model
    for mod in hf.modules():
        if type(mod) is torch.nn.Linear and "forward" in mod.__dict__:
            del mod.forward  # the instance's routed forward: back to nn.Linear's own
    use_kernels(hf, resolve_kernels(kernels, "cpu"), "cpu")


def run(model: LoadedModel, tqs: list[TokenizedQuery], setting: dict[str, Any],
        window: int) -> tuple[float, np.ndarray]:
    """Seconds for ``tqs`` window by window under ``setting``, and every option log-prob."""
    opts = ExtractOptions()
    set_kernels(model, setting["kernels"])
    lp: list[np.ndarray | None] = [None] * len(tqs)
    t0 = clock.now()
    for a, b in windows(len(tqs), window):
        for batch, outs, _ in run_trie(model, tqs[a:b],
                                       max_rows=setting.get("max_rows", opts.max_rows),
                                       max_tokens=setting.get("max_tokens", opts.max_tokens)):
            for q, o in zip(batch, outs, strict=True):
                lp[a + q] = o.option_logprob
    seconds = clock.now() - t0
    return seconds, np.concatenate([x for x in lp if x is not None])


def unique_tokens(tqs: list[TokenizedQuery], window: int) -> int:
    """Tokens of the windows' radix trees: what the runner computes."""
    return sum(build([r.ids for r in forward_rows(tqs[a:b])]).tokens
               for a, b in windows(len(tqs), window))


def main() -> None:
    """Run every setting in rotating order, each after a floor measurement."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="coin-flip", help="coin-flip, or a revealed-belief grid")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--floor-repeat", type=int, default=3)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    clock.add_options(ap)
    args = ap.parse_args()
    clock.apply(args)
    from transformers import AutoModelForCausalLM

    model = load("smollm2-135m", kernels="default")
    plain = AutoModelForCausalLM.from_pretrained(model.info.weights_cache,
                                                 dtype=torch.float32).eval()  # type: ignore[no-untyped-call]
    tqs = queries(model, bench_env(args.env, args.turns), args.episodes)
    window = ExtractOptions().window
    unique = unique_tokens(tqs, window)
    print(f"workload ({args.env}): {len(tqs)} queries, {unique} tokens computed; auto "
          f"kernels = {resolve_kernels('auto', 'cpu')}; clock={args.clock} "
          f"threads={torch.get_num_threads()}")
    names = list(args.settings)
    ratios: dict[str, list[float]] = {n: [] for n in names}
    lps: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        for n in names[r % len(names):] + names[: r % len(names)]:
            rate = floor_rate(plain, repeat=args.floor_repeat)
            seconds, lps[n] = run(model, tqs, SETTINGS[n], window)
            ratios[n].append(seconds / (unique / rate))
            print(f"round {r} {n}: {seconds:.1f}s, floor {rate:.0f} tok/s, "
                  f"ratio {ratios[n][-1]:.2f}", flush=True)
    ref = lps.get("current", next(iter(lps.values())))
    for n in names:
        print(f"{n:8s} median ratio {statistics.median(ratios[n]):.2f}  "
              f"max |d option log-prob| vs current {float(np.abs(lps[n] - ref).max()):.1e}")
    print(" ".join(f"ratio_{n}={statistics.median(ratios[n]):.2f}" for n in names))


if __name__ == "__main__":
    main()
