"""Peak memory of extraction for 1k vs 10k read-outs (it should stay flat: results stream to disk).

Each size runs in its own process (so each peak is its own) and prints its peak
RSS. The model is a random Llama with the default model's residual shape
(30 layers, d_model 576: the same bytes per read-out as SmolLM2-135M, and the same
49k vocabulary) but a narrow attention and MLP, so that 10k read-outs finish in
minutes on two cores; what is measured is the pipeline's memory, not the
weights'. The workload is coin flip, multi-turn, 10 turns, both probes, every
rotation (70 read-outs per episode).

Last line: ``rss_1k_mb=... rss_10k_mb=... growth=+x.x% write_share=y.y%``.
Run: ``.venv/bin/python -m bench.memory [--sizes 1000 10000] [--row-tokens 0]``.

``--long-context`` measures long contexts on SmolLM2-135M instead, under each ``--budget``
(``--max-memory``; ``auto`` is the default, a quarter of the machine's memory): the
recommender on BayesBench's fitted world (``../shared/peers/bayesbench/recommender``; 2
episodes of the default deliveries, about 2,700-token contexts at 10 turns) and a 20-step
twenty-questions study, each in its own process. One line per run:
``long_context env=... budget=... peak_rss_mb=... budget_mb=... weights_mb=... base_rss_mb=...
rise_mb=... wall_s=...``, where ``base_rss_mb`` is the resident size once the model is loaded
(the interpreter, its libraries and the weights) and ``rise_mb`` the peak's rise over it,
what the budget bounds.
``--episodes``, ``--turns`` and ``--delivery`` reduce the recommender's study (the same
context lengths with fewer read-outs; ``--delivery all`` is the study of
docs/performance.md, 1,276 read-outs, both plain deliveries), ``--steps`` twenty
questions', ``--envs`` picks the workloads. ``--rounds N`` runs each N times and ends with
a ``long_context_median`` line per workload and budget: the median peak, and the median
rise against the budget. ``--keep DIR`` keeps the first round's files, for
``bench/compare_caches.py``.
Run: ``.venv/bin/python -m bench.memory --long-context --budget auto 1.5GB``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._lib import WriteTimer, peak_rss_mb, rss_mb, smol_shaped_random


def child(n_readouts: int, threads: int, row_tokens: int) -> None:
    """Extract ``n_readouts`` read-outs (rounded up to whole episodes) and print JSON."""
    import torch

    import belieflens.envs as envs
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    torch.set_num_threads(threads)
    model = smol_shaped_random(narrow=True)
    turns = 10
    env = envs.get("coin-flip", turns=turns, delivery="multi-turn")
    per_episode = turns * 7
    episodes = -(-n_readouts // per_episode)
    with tempfile.TemporaryDirectory() as tmp, WriteTimer() as w:
        t0 = time.perf_counter()
        write_cache(env, model, Path(tmp) / "mem.h5",
                ExtractOptions(episodes=episodes, row_tokens=row_tokens))
        wall = time.perf_counter() - t0
    peak = peak_rss_mb()
    print(json.dumps({"readouts": episodes * per_episode, "peak_rss_mb": peak,
                      "wall_s": wall, "write_s": w.seconds}))


WORLD = Path(__file__).resolve().parents[2] / "shared" / "peers" / "bayesbench" / "recommender"
"""BayesBench's fitted recommender world (the peers' data, next to the repository)."""


def long_child(env: str, budget: str, args: argparse.Namespace) -> None:
    """Extract one long-context study under ``budget`` in this process and print JSON."""
    import torch

    import belieflens
    from belieflens.model.load import load
    from belieflens.run.budget import default_memory, parse_size

    torch.set_num_threads(args.threads)
    model = load("smollm2-135m")
    weights = sum(p.numel() * p.element_size()
                  for p in model.bridge.original_model.parameters())
    base = rss_mb()  # the interpreter, the libraries and the weights, before extraction
    params: dict[str, object] = {"steps": args.steps} if env == "twenty-questions" else {
        "world": str(args.world), "turns": args.turns}
    if args.delivery and env == "recommender":
        params["delivery"] = args.delivery
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = belieflens.extract(env, params=params, out=Path(tmp) / "long.h5", model=model,
                                  episodes=args.episodes, seed=1, max_memory=budget)
        wall = time.perf_counter() - t0
        peak = peak_rss_mb()
        n = belieflens.open_cache(path).sizes["query"]
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(args.keep) / f"{env}-{budget}.h5")
    spent = default_memory("cpu") if budget == "auto" else parse_size(budget)
    print(json.dumps({"env": env, "budget": budget, "readouts": n, "peak_rss_mb": peak,
                      "base_rss_mb": base,
                      "budget_mb": spent / 2**20, "weights_mb": weights / 2**20,
                      "wall_s": wall}))


def long_context(args: argparse.Namespace) -> None:
    """Each long-context workload under each budget, in its own process, ``--rounds`` times
    (the budgets in turn within a round); then each one's median over the rounds."""
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for rnd in range(args.rounds):
        for env in args.envs:
            for budget in args.budget:
                cmd = [sys.executable, "-m", "bench.memory", "--long-child", env,
                       "--budget", budget, "--threads", str(args.threads),
                       "--episodes", str(args.episodes),
                       "--turns", str(args.turns), "--world", str(args.world),
                       "--steps", str(args.steps)]
                cmd += ["--delivery", args.delivery] if args.delivery else []
                cmd += ["--keep", args.keep] if args.keep and rnd == 0 else []
                out = subprocess.run(cmd, check=True, capture_output=True, text=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                runs.setdefault((env, budget), []).append(r)
                print(f"long_context round={rnd + 1} env={r['env']} budget={r['budget']} "
                      f"readouts={r['readouts']} peak_rss_mb={r['peak_rss_mb']:.0f} "
                      f"budget_mb={r['budget_mb']:.0f} weights_mb={r['weights_mb']:.0f} "
                      f"base_rss_mb={r['base_rss_mb']:.0f} "
                      f"rise_mb={r['peak_rss_mb'] - r['base_rss_mb']:.0f} "
                      f"wall_s={r['wall_s']:.1f}", flush=True)
    for (env, budget), rs in runs.items():
        peak = statistics.median(r["peak_rss_mb"] for r in rs)
        rise = statistics.median(r["peak_rss_mb"] - r["base_rss_mb"] for r in rs)
        print(f"long_context_median env={env} budget={budget} rounds={len(rs)} "
              f"peak_rss_mb={peak:.0f} rise_mb={rise:.0f} budget_mb={rs[0]['budget_mb']:.0f} "
              f"rise_within_budget={rise <= rs[0]['budget_mb']} "
              f"wall_s={statistics.median(r['wall_s'] for r in rs):.1f}", flush=True)


def main() -> None:
    """Run each size in a subprocess and compare the peaks (or the long-context runs)."""
    from belieflens.run.extract import ExtractOptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs=2, default=[1000, 10000])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--row-tokens", type=int, default=ExtractOptions().row_tokens,
                    help="extraction's --row-tokens (0: one edge per row, as before packing)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--long-context", action="store_true",
                    help="the long-context workloads on SmolLM2-135M under each --budget")
    ap.add_argument("--budget", nargs="+", default=["auto", "1.5GB"],
                    help="--max-memory of each long-context run (auto: the default)")
    ap.add_argument("--envs", nargs="+", default=["recommender", "twenty-questions"],
                    choices=["recommender", "twenty-questions"])
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--turns", type=int, default=10, help="the recommender's turns")
    ap.add_argument("--delivery", default="", help="the recommender's delivery (default: its "
                    "default, multi-turn-self, which generates the model's replies)")
    ap.add_argument("--world", type=Path, default=WORLD)
    ap.add_argument("--steps", type=int, default=20, help="twenty-questions' steps per game")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each workload and budget "
                    "(then the median of each)")
    ap.add_argument("--keep", default="", help="copy each long-context file into this folder")
    ap.add_argument("--long-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.long_child is not None:
        long_child(args.long_child, args.budget[0], args)
        return
    if args.long_context:
        long_context(args)
        return
    if args.child is not None:
        child(args.child, args.threads, args.row_tokens)
        return
    res = []
    for n in args.sizes:
        out = subprocess.run(
            [sys.executable, "-m", "bench.memory", "--child", str(n), "--threads",
             str(args.threads), "--row-tokens", str(args.row_tokens)],
            check=True, capture_output=True, text=True,
        ).stdout.strip().splitlines()[-1]
        r = json.loads(out)
        res.append(r)
        print(f"{r['readouts']} read-outs: peak RSS {r['peak_rss_mb']:.0f} MB, "
              f"wall {r['wall_s']:.1f}s, HDF5 writes {r['write_s']:.2f}s "
              f"({100 * r['write_s'] / r['wall_s']:.1f}%)")
    a, b = res
    growth = 100 * (b["peak_rss_mb"] / a["peak_rss_mb"] - 1)
    print(f"rss_1k_mb={a['peak_rss_mb']:.0f} rss_10k_mb={b['peak_rss_mb']:.0f} "
          f"growth={growth:+.1f}% write_share={100 * b['write_s'] / b['wall_s']:.1f}%")


if __name__ == "__main__":
    main()
