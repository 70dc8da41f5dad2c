"""Generation across episodes against one text at a time: the same studies, paired in one
process, ``--gen-batch 1`` beside the default.

Each workload is one ``belieflens extract`` on SmolLM2-135M, run twice per round in rotating
order: with ``--gen-batch 1`` (every text generated alone, one token per forward) and with
``--gen-batch`` as given (default ``auto``: the episodes' pending texts decoded together,
sized by ``--max-memory``). The gate's workloads are the defaults:

- ``twenty-questions``: the paper's protocol at its default 20 steps, 8 episodes;
- ``recommender``: BayesBench's fitted world (``../shared/peers/bayesbench/recommender``),
  delivery ``multi-turn-self`` (the model writes its own replies), 4 episodes.

``--set NAME=VALUE`` changes a workload's parameters (``--set steps=1`` for 20 Questions,
``--set turns=3`` for the recommender), ``--episodes`` its episodes, so a reduced run
finishes on a small machine; every such change is printed.

Per run: wall seconds and this process's CPU seconds (on a machine other jobs share, the
CPU time of one thread is what stays comparable), generated texts and tokens, and the peak
resident memory's rise over the resident size before the run (what ``--max-memory`` bounds;
the peak is reset before each run through ``/proc/self/clear_refs``). Per workload:
``speedup`` (the one-at-a-time run's wall time over the batched one's, median over rounds),
``speedup_cpu`` (the same in CPU seconds), ``prepare_speedup`` and ``prepare_speedup_cpu``
(the same for the part before the first read-out runs: building the episodes, where every
text is generated and every score read, and rendering them; the read-outs after it are the
same work in both runs) and whether the two runs wrote the same texts
(``texts_equal=k/n``; scores to 1e-4, since the companions of a scored read-out change its
last bits).
Last line: ``generation env=... speedup=... speedup_cpu=... prepare_speedup=... texts_equal=...
rise_mb=... budget_mb=... within_budget=...`` (one per workload).

The whole gate is one command with no options: ``.venv/bin/python -m bench.generation``
(both workloads at their defaults; ``--device cuda`` on a GPU, where the peak is the CUDA
allocator's). Run: ``.venv/bin/python -m bench.generation [--env twenty-questions]
[--episodes 8] [--set steps=20] [--threads 1] [--rounds 1] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._lib import parse_sets, peak_rss_mb, rss_mb

WORLD = Path(__file__).resolve().parents[2] / "shared" / "peers" / "bayesbench" / "recommender"
"""BayesBench's fitted recommender world (the peers' data, next to the repository)."""

WORKLOADS: dict[str, tuple[int, dict[str, str]]] = {
    "twenty-questions": (8, {}),
    "recommender": (4, {"world": str(WORLD), "delivery": "multi-turn-self"}),
}
"""The gate's workloads: episodes and parameters."""


@dataclass(frozen=True)
class Run:
    """One extraction: its time, peak rise, and what it generated."""

    gen_batch: str
    seconds: float
    cpu_seconds: float
    prepare_seconds: float
    """Wall seconds until the first read-out could run: the episodes built (every text
    generated and scored) and rendered, the file allocated."""
    prepare_cpu: float
    rise_mb: float
    texts: list[tuple[Any, ...]]
    scores: list[list[float]]
    tokens: int


def reset_peak() -> None:
    """Reset this process's peak resident size (``VmHWM``) to its current size."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_start(device: str) -> float:
    """Reset the peak memory of ``device`` (this process's resident size on the CPU, the
    allocator's peak on CUDA); the MiB in use now."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return float(torch.cuda.memory_allocated()) / 2**20
    reset_peak()
    return rss_mb()


def _peak_mb(device: str) -> float:
    """The peak MiB of ``device`` since :func:`_peak_start`."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
        return float(torch.cuda.max_memory_allocated()) / 2**20
    return peak_rss_mb()


def run(model: Any, env: str, params: dict[str, str], episodes: int, gen_batch: str,
        max_memory: str) -> Run:
    """One extraction of the workload into a temporary file."""
    import belieflens
    from belieflens.run.extract import Progress
    from belieflens.run.generation_log import read_log

    ready: list[tuple[float, float]] = []

    def first_progress(event: object) -> None:
        if isinstance(event, Progress) and not ready:
            ready.append((time.perf_counter(), time.process_time()))

    with tempfile.TemporaryDirectory() as tmp:
        device = model.info.device.split(":")[0]
        base = _peak_start(device)
        t0, c0 = time.perf_counter(), time.process_time()
        path = belieflens.extract(env, params=params, out=Path(tmp) / "gen.h5", model=model,
                                  episodes=episodes, seed=0, gen_batch=gen_batch,
                                  max_memory=max_memory, on_event=first_progress)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        rise = _peak_mb(device) - base
        ds = belieflens.open_cache(path)
        log = read_log(ds)
        ds.close()
    texts = [(r.role, r.messages, r.seed, r.text, r.episode) for r in log if r.role != "score"]
    scores = [json.loads(r.text)["logprob"] for r in log if r.role == "score"]
    return Run(gen_batch, seconds, cpu, ready[0][0] - t0, ready[0][1] - c0, rise, texts, scores,
               sum(r.tokens for r in log))


def same(a: Run, b: Run) -> tuple[int, int, bool]:
    """Texts written alike by both runs, of all, and whether their scores agree to 1e-4."""
    n = max(len(a.texts), len(b.texts))
    k = sum(x == y for x, y in zip(a.texts, b.texts, strict=False))
    scores = len(a.scores) == len(b.scores) and all(
        len(x) == len(y) and all(abs(u - v) <= 1e-4 for u, v in zip(x, y, strict=True))
        for x, y in zip(a.scores, b.scores, strict=True))
    return k, n, scores


def workload(model: Any, env: str, params: dict[str, str], episodes: int,
             args: argparse.Namespace) -> None:
    """Both runs of one workload, ``--rounds`` times in rotating order; the summary line."""
    from belieflens.run.budget import default_memory, parse_size

    print(f"workload {env}: {episodes} episodes, parameters {params or 'default'}", flush=True)
    modes = ["1", args.gen_batch]
    runs: dict[str, list[Run]] = {m: [] for m in modes}
    for rnd in range(args.rounds):
        for mode in modes[rnd % 2:] + modes[:rnd % 2]:
            r = run(model, env, params, episodes, mode, args.max_memory)
            runs[mode].append(r)
            print(f"round {rnd + 1} env={env} gen_batch={mode} wall_s={r.seconds:.1f} "
                  f"cpu_s={r.cpu_seconds:.1f} prepare_s={r.prepare_seconds:.1f} "
                  f"prepare_cpu_s={r.prepare_cpu:.1f} texts={len(r.texts)} tokens={r.tokens} "
                  f"tokens_per_s={r.tokens / r.seconds:.2f} rise_mb={r.rise_mb:.0f}",
                  flush=True)
    one, many = runs["1"], runs[args.gen_batch]
    speedup = statistics.median(a.seconds / b.seconds for a, b in zip(one, many, strict=True))
    cpu = statistics.median(a.cpu_seconds / b.cpu_seconds for a, b in zip(one, many, strict=True))
    prep = statistics.median(a.prepare_cpu / b.prepare_cpu for a, b in zip(one, many, strict=True))
    prep_wall = statistics.median(a.prepare_seconds / b.prepare_seconds
                                  for a, b in zip(one, many, strict=True))
    k, n, scores = same(one[0], many[0])
    budget = (default_memory(model.info.device) if args.max_memory == "auto"
              else parse_size(args.max_memory)) / 2**20
    rise = max(r.rise_mb for r in many)
    print(f"generation env={env} episodes={episodes} rounds={args.rounds} "
          f"one_s={statistics.median(r.seconds for r in one):.1f} "
          f"batched_s={statistics.median(r.seconds for r in many):.1f} speedup={speedup:.2f} "
          f"speedup_cpu={cpu:.2f} prepare_speedup={prep_wall:.2f} prepare_speedup_cpu={prep:.2f} "
          f"texts_equal={k}/{n} scores_within_1e-4={scores} rise_mb={rise:.0f} "
          f"budget_mb={budget:.0f} within_budget={rise <= budget}", flush=True)


def main() -> None:
    """Parse the options, load the model once, run each workload."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", choices=sorted(WORKLOADS), action="append",
                    help="workload (repeatable; default: both)")
    ap.add_argument("--episodes", type=int, default=0, help="episodes (0: the gate's)")
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="a workload parameter NAME=VALUE (e.g. steps=1)")
    ap.add_argument("--gen-batch", default="auto", help="the batched run's --gen-batch")
    ap.add_argument("--max-memory", default="auto", help="both runs' --max-memory")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch's CPU threads")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the model runs (cuda: peak memory is the allocator's)")
    args = ap.parse_args()
    import torch

    from belieflens.model.load import load

    torch.set_num_threads(args.threads)
    model = load("smollm2-135m", device=args.device)
    sets = parse_sets(args.sets)
    if sets and len(args.env or WORKLOADS) != 1:
        raise SystemExit("error: --set changes one workload: name it with --env")
    if "recommender" in (args.env or WORKLOADS) and not Path(sets.get("world", WORLD)).is_dir():
        raise SystemExit(f"error: BayesBench's world is not at {WORLD}: pass --env recommender "
                         "--set world=PATH/peers/bayesbench/recommender")
    for env in args.env or list(WORKLOADS):
        episodes, params = WORKLOADS[env]
        workload(model, env, {**params, **sets}, args.episodes or episodes, args)


if __name__ == "__main__":
    main()
