"""Extraction benchmark: belieflens vs the raw-forward limit vs a naive run_with_cache loop.

One process, one run, one workload (coin flip, multi-turn delivery, both probes, every
rotation), measured side by side:

(a) belieflens extraction (radix-tree prefix reuse, batched edges, hooks and unembedding
    at read positions only), written to a cache file; the share of (a) spent writing
    HDF5 is measured too;
(b) the practical limit: a plain transformers forward (no bridge, no hooks) over exactly
    the unique tokens of the workload — the sequences in lexicographic order with one KV
    cache cropped to the shared prefix, so every node of the token trie is computed once —
    with logits at the last position only;
(c) a naive loop: ``bridge.run_with_cache`` on every query's full prompt, one at a time;
(f) a compute floor: the unique tokens at the plain model's best throughput, measured on
    large batches of fresh tokens (no reuse structure, no bridge) — no schedule of
    these tokens on this machine can be much faster; the best of three forwards, a peak;
(s) the same forward held: back to back over as many fresh tokens as (a)'s workload has
    unique ones, one pass — the floor's shape at the machine's speed over a run as long.

A second, shallower workload, a revealed-belief grid (``--grid``, default ``preference``:
every prompt of the grid, every rotation; the prompts share little but their rotations),
runs (a) and (f) only.

The last line reads ``ratio_vs_limit=a/b speedup_vs_naive=c/a peak_rss_mb=...`` and then
``ratio_vs_floor=a/f write_share=... ratio_vs_sustained=a/s grid_ratio_vs_floor=a/f
grid_ratio_vs_sustained=a/s`` (the grid's, against (s)'s rate), then ``coin_extract_vs_past
coin_past_vs_peak grid_extract_vs_past grid_past_vs_peak``: bench/floor_gap.py's paired
breakdown of each workload (``--breakdown-rounds``, median of 3 by default), the measure
the floor goal is stated on.
Run: ``.venv/bin/python -m bench.extract [--episodes 16 --turns 12]`` (defaults are sized for
a 2-core machine; the naive loop dominates the run time).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import torch

import belieflens.envs as envs
from belieflens.model.load import LoadedModel, load
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache
from belieflens.run.runner import forward_rows, resid_hook_names
from belieflens.run.trie import build
from bench._lib import (
    WriteTimer,
    add_clock_options,
    add_results_option,
    apply_clock,
    bench_env,
    floor_rate,
    now,
    peak_rss_mb,
    queries,
    start_results,
    sustained_rate,
    write_line_results,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def raw_limit(model: PreTrainedModel, seqs: list[tuple[int, ...]]) -> float:
    """Seconds for a plain forward over the unique tokens (trie order, cropped KV cache)."""
    from transformers import DynamicCache

    t0 = now()
    cache = DynamicCache()
    prev: tuple[int, ...] = ()
    with torch.inference_mode():
        for s in seqs:
            lcp = 0
            while lcp < min(len(s), len(prev)) and s[lcp] == prev[lcp]:
                lcp += 1
            lcp = min(lcp, len(s) - 1)  # at least one new token yields the last logits
            drop = cache.get_seq_length() - lcp
            if drop > 0:
                cache.crop(-drop)
            model(torch.tensor([s[lcp:]]), past_key_values=cache, use_cache=True,
                  logits_to_keep=1)
            prev = s
    return now() - t0


def naive_loop(loaded: LoadedModel, tqs: list[TokenizedQuery]) -> float:
    """Seconds for run_with_cache per forward row on its full prompt, one at a time."""
    names = set(resid_hook_names(loaded.info.n_layers))
    t0 = now()
    with torch.inference_mode():
        for r in forward_rows(tqs):
            _, cache = loaded.bridge.run_with_cache(
                torch.tensor([r.ids]), names_filter=lambda n: n in names)
            del cache
    return now() - t0


def workload(
    loaded: LoadedModel, env: envs.Environment, episodes: int, name: str
) -> tuple[list[TokenizedQuery], list[tuple[int, ...]], int, int]:
    """Queries, forward rows in trie order, unique and prompt tokens of ``episodes`` of ``env``."""
    tqs = queries(loaded, env, episodes)
    rows = forward_rows(tqs)
    seqs = sorted({r.ids for r in rows})  # every forward row once, in trie order
    unique = build(seqs).tokens
    naive_tokens = sum(len(r.ids) for r in rows)
    print(f"workload ({name}): {len(tqs)} queries, {naive_tokens} prompt tokens, {unique} "
          f"unique tokens ({naive_tokens / unique:.1f}x sharing)")
    return tqs, seqs, unique, naive_tokens


def timed_extract(
    loaded: LoadedModel, env: envs.Environment, episodes: int, label: str, batch_size: int,
    window: int = ExtractOptions().window,
) -> tuple[float, float]:
    """Seconds of ``belieflens extract`` of ``episodes`` of ``env``, and of its HDF5 writes."""
    with tempfile.TemporaryDirectory() as tmp, WriteTimer() as writes:
        tokens = [0]
        t0 = now()
        write_cache(env, loaded, Path(tmp) / "bench.h5",
                ExtractOptions(episodes=episodes, max_rows=batch_size, window=window),
                on_progress=lambda p: tokens.__setitem__(0, p.tokens))
        a = now() - t0
    print(f"{label}: {a:.1f}s, {tokens[0]} tokens computed ({tokens[0] / a:.0f} tok/s); "
          f"HDF5 writes {writes.seconds:.2f}s ({100 * writes.seconds / a:.1f}%)")
    return a, writes.seconds


def paired(loaded: LoadedModel, plain: PreTrainedModel,
           workloads: dict[str, list[TokenizedQuery]], rounds: int) -> str:
    """``extract_vs_past`` and ``past_vs_peak`` of each workload (bench/floor_gap.py's paired
    measure: the runner over the plain model's own forward of the same calls, and those
    calls over the peak floor), as ``NAME_extract_vs_past=... NAME_past_vs_peak=...``."""
    from bench.floor_gap import breakdown

    out = ""
    for name, tqs in workloads.items():
        r = breakdown(loaded, plain, tqs, label=name, rounds=rounds)
        out += (f" {name}_extract_vs_past={r['extract_vs_past']:.2f}"
                f" {name}_past_vs_peak={r['past_vs_peak']:.2f}")
    return out


def main() -> None:
    """Run the three measurements and print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--turns", type=int, default=6)
    add_clock_options(ap)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--kernels", default="auto", help="CPU kernels of (a): auto, default, onednn")
    ap.add_argument("--skip-naive", action="store_true", help="skip (c) (then no speedup)")
    ap.add_argument("--grid", default="preference",
                    help="revealed-belief grid of the second workload ('none': skip it)")
    ap.add_argument("--grid-episodes", type=int, default=72, help="prompts of the grid run")
    ap.add_argument("--batch-size", type=int, default=ExtractOptions().max_rows,
                    help="rows per forward call of (a) (default: extraction's default)")
    ap.add_argument("--window", type=int, default=ExtractOptions().window,
                    help="queries per window of (a) (default: extraction's default)")
    ap.add_argument("--breakdown-rounds", type=int, default=3,
                    help="rounds of bench/floor_gap.py's paired breakdown on each workload "
                         "(0: skip it)")
    add_results_option(ap)
    args = ap.parse_args()
    recorder = start_results(args)
    apply_clock(args)
    loaded = load("smollm2-135m", device=args.device, kernels=args.kernels)
    env = bench_env("coin-flip", args.turns)
    tqs, seqs, unique, naive_tokens = workload(loaded, env, args.episodes, "coin flip")
    print(f"threads={torch.get_num_threads()} device={args.device} clock={args.clock} "
          f"kernels(a)={loaded.info.kernels}")
    print(f"batch size (a): {args.batch_size}, window (a): {args.window}")
    a, write_s = timed_extract(loaded, env, args.episodes, "(a) belieflens extract",
                               args.batch_size, args.window)
    if args.grid != "none":
        grid_env = envs.get(args.grid)
        grid_tqs, _, grid_unique, _ = workload(loaded, grid_env, args.grid_episodes,
                                               f"{args.grid} grid")
        grid_a, _ = timed_extract(loaded, grid_env, args.grid_episodes,
                                  f"(a) belieflens extract, {args.grid} grid", args.batch_size)

    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(loaded.info.weights_cache,
                                                 dtype=torch.float32).to(args.device).eval()
    raw_limit(plain, seqs[:3])  # warm-up
    b = raw_limit(plain, seqs)
    print(f"(b) raw forward over unique tokens: {b:.1f}s ({unique / b:.0f} tok/s)")
    rate = floor_rate(plain)
    f = unique / rate
    print(f"(f) compute floor: {f:.1f}s ({rate:.0f} tok/s on 4x128 fresh tokens)")
    held = sustained_rate(plain, unique)
    print(f"(s) the floor's forward held over the unique tokens: {unique / held:.1f}s "
          f"({held:.0f} tok/s)")
    ratios = f" ratio_vs_sustained={a * held / unique:.2f}"
    if args.grid != "none":
        grid_f = grid_unique / rate
        print(f"(f) compute floor, {args.grid} grid: {grid_f:.1f}s")
        ratios += (f" grid_ratio_vs_floor={grid_a / grid_f:.2f}"
                 f" grid_ratio_vs_sustained={grid_a * held / grid_unique:.2f}")
    if args.breakdown_rounds > 0:
        ratios += paired(loaded, plain, {"coin": tqs, **(
            {"grid": grid_tqs} if args.grid != "none" else {})}, args.breakdown_rounds)
    del plain
    if args.skip_naive:
        c = float("nan")
    else:
        c = naive_loop(loaded, tqs)
        print(f"(c) naive run_with_cache loop: {c:.1f}s ({naive_tokens / c:.0f} tok/s)")
    peak = peak_rss_mb()
    line = (f"ratio_vs_limit={a / b:.2f} speedup_vs_naive={c / a:.1f} peak_rss_mb={peak:.0f} "
            f"ratio_vs_floor={a / f:.2f} write_share={100 * write_s / a:.1f}%{ratios}")
    print(line)
    write_line_results(recorder, args.results, line)


if __name__ == "__main__":
    main()
