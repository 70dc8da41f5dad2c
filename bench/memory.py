"""Peak memory of extraction for 1k vs 10k read-outs (it should stay flat: results stream to disk).

Each size runs in its own process (so each peak is its own) and prints its peak
RSS. The model is a random Llama with the default model's residual shape
(30 layers, d_model 576: the same bytes per read-out as SmolLM2-135M, and the same
49k vocabulary) but a narrow attention and MLP, so that 10k read-outs finish in
minutes on two cores; what is measured is the pipeline's memory, not the
weights'. The workload is coin flip, multi-turn, 10 turns, both probes, every
rotation (70 read-outs per episode).

Last line: ``rss_1k_mb=... rss_10k_mb=... growth=+x.x% write_share=y.y%``.
Run: ``.venv/bin/python bench/memory.py [--sizes 1000 10000] [--row-tokens 0]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: the repository root on the path, as -m has it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._lib import WriteTimer, peak_rss_mb, smol_shaped_random


def child(n_readouts: int, threads: int, row_tokens: int) -> None:
    """Extract ``n_readouts`` read-outs (rounded up to whole episodes) and print JSON."""
    import torch

    import belieflens.envs as envs
    from belieflens.run.extract import ExtractOptions, extract

    torch.set_num_threads(threads)
    model = smol_shaped_random(narrow=True)
    turns = 10
    env = envs.get("coin-flip", turns=turns, delivery="multi-turn")
    per_episode = turns * 7
    episodes = -(-n_readouts // per_episode)
    with tempfile.TemporaryDirectory() as tmp, WriteTimer() as w:
        t0 = time.perf_counter()
        extract(env, model, Path(tmp) / "mem.h5",
                ExtractOptions(episodes=episodes, row_tokens=row_tokens))
        wall = time.perf_counter() - t0
    peak = peak_rss_mb()
    print(json.dumps({"readouts": episodes * per_episode, "peak_rss_mb": peak,
                      "wall_s": wall, "write_s": w.seconds}))


def main() -> None:
    """Run each size in a subprocess and compare the peaks."""
    from belieflens.run.extract import ExtractOptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs=2, default=[1000, 10000])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--row-tokens", type=int, default=ExtractOptions().row_tokens,
                    help="extraction's --row-tokens (0: one edge per row, as before packing)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.threads, args.row_tokens)
        return
    res = []
    for n in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(n), "--threads", str(args.threads),
             "--row-tokens", str(args.row_tokens)],
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
