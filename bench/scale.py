"""Sharded extraction's overhead: the same study on ``local:2`` vs one process.

Both runs are fresh processes of the same study (coin flip, both deliveries, both probes,
every rotation, on the default model): (a) ``belieflens extract ... --threads 2`` (one
process, 2 threads) and (b) the same on a ``LocalCluster`` of 2 worker processes with 1
thread each (``--cluster local:2``), driven through :func:`belieflens.run.shards.run_study`
so the per-shard figures are at hand. On 2 cores the cluster cannot be faster: the ratio is
the engine's overhead (cluster start, a second model load, the plan, scheduling).

Startup per shard: the fixed costs of (b) (cluster start, the plan task with the first model
load, the other worker's model load) divided by the number of shards. The merged study is
compared with (a) (bit for bit on CPU when the kernels and thread counts agree; here the
worker runs 1 thread and the single process 2, so the figure printed is the max difference).

Last line: ``ratio_cluster_vs_single=... startup_per_shard_s=... shards=...``.
Run: ``.venv/bin/python -m bench.scale [--episodes 4 --turns 6 --window 64]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cluster_child(args: argparse.Namespace, out: Path) -> None:
    """Run the study on local:N and print one JSON line of timings."""
    t0 = time.perf_counter()
    from belieflens.envs import get as get_env
    from belieflens.run import cluster
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.job import Models
    from belieflens.run.shards import ShardJob, run_study

    client = cluster.connect(f"local:{args.workers}")
    started = time.perf_counter() - t0
    job = ShardJob(make_env=get_env, env="coin-flip", params={"turns": args.turns},
                   models=Models(args.model),
                   options=ExtractOptions(episodes=args.episodes, window=args.window))
    run = run_study(client, job, out, shard_episodes=args.shard_episodes)
    cluster.close(client)
    wall = time.perf_counter() - t0
    print(json.dumps({
        "wall": wall, "cluster_start": started, "plan": run.plan_seconds,
        "shards": len(run.shards),
        "loads": [r.load_seconds for r in run.shards if r.load_seconds > 0],
        "task_seconds": [r.seconds for r in run.shards],
        "pids": sorted({r.pid for r in run.shards}),
    }))


def main() -> None:
    """Run (a) and (b) and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-episodes", type=int, default=0)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--child", default="")
    args = ap.parse_args()
    if args.child:
        cluster_child(args, Path(args.child))
        return
    exe = Path(sys.executable).with_name("belieflens")
    with tempfile.TemporaryDirectory() as tmp:
        single = Path(tmp) / "single.h5"
        t0 = time.perf_counter()
        subprocess.run([str(exe), "extract", "coin-flip", "--set", f"turns={args.turns}",
                        "--episodes", str(args.episodes), "--window", str(args.window),
                        "--model", args.model, "--threads", "2", "--quiet", "--out",
                        str(single)], check=True, stdout=subprocess.DEVNULL)
        single_s = time.perf_counter() - t0
        study = Path(tmp) / "study"
        out = subprocess.run(
            [sys.executable, "-m", "bench.scale", "--child", str(study), "--episodes",
             str(args.episodes), "--turns", str(args.turns), "--window", str(args.window),
             "--workers",
             str(args.workers), "--shard-episodes", str(args.shard_episodes), "--model",
             args.model], check=True, capture_output=True, text=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        import numpy as np
        import xarray as xr

        from belieflens.store.cache import merge

        merged = merge(study, Path(tmp) / "merged.h5")
        with xr.open_dataset(single, engine="h5netcdf") as a, \
                xr.open_dataset(merged, engine="h5netcdf") as b:
            queries = a.sizes["query"]
            diff = {v: float(np.nanmax(np.abs(a[v].values - b[v].values)))
                    for v in ("resid", "option_logprob")}
            same = all(np.array_equal(a[v].values, b[v].values, equal_nan=True)
                       for v in ("resid", "option_logprob", "input_ids"))
        shutil.rmtree(study, ignore_errors=True)
    fixed = r["cluster_start"] + r["plan"] + max(r["loads"] or [0.0])
    print(f"study: coin-flip turns={args.turns} episodes={args.episodes} window={args.window}: "
          f"{queries} read-outs; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"(a) one process, 2 threads: {single_s:.1f} s")
    print(f"(b) local:{args.workers}, 1 thread each: {r['wall']:.1f} s (cluster start "
          f"{r['cluster_start']:.1f} s, plan {r['plan']:.1f} s incl. first model load, "
          f"other loads {r['loads']}, {r['shards']} shards, task seconds "
          f"{[round(x, 1) for x in r['task_seconds']]})")
    print(f"merged study vs (a): bit-identical={same} max|diff| {diff}")
    print(f"ratio_cluster_vs_single={r['wall'] / single_s:.2f} "
          f"startup_per_shard_s={fixed / max(1, r['shards']):.2f} shards={r['shards']}")


if __name__ == "__main__":
    main()
