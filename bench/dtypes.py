"""Belief error of reduced-precision compute: bfloat16 / float16 against float32.

Runs the same small coin-flip workload on the embedded model in each dtype and
reports, against float32: the largest option log-prob difference, the mean and
largest TVD between debiased beliefs, and the wall time ratio.
Run: ``.venv/bin/python -m bench.dtypes [--episodes 2 --turns 4]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import belieflens
import belieflens.envs as envs
from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.divergence import tvd
from belieflens.model.load import load
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache


def main() -> None:
    """Extract in float32 and each reduced dtype; print the differences."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtypes", default="bfloat16,float16")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    env = envs.get("coin-flip", turns=args.turns)
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for dtype in ["float32", *args.dtypes.split(",")]:
            model = load("smollm2-135m", dtype=dtype)
            t0 = time.perf_counter()
            path = write_cache(env, model, Path(tmp) / f"{dtype}.h5",
                           ExtractOptions(episodes=args.episodes))
            results[dtype] = (path, time.perf_counter() - t0)
            del model
        ref = belieflens.open_cache(results["float32"][0])
        ref_b = output_beliefs(ref)
        for dtype, (path, secs) in results.items():
            if dtype == "float32":
                continue
            ds = belieflens.open_cache(path)
            b = output_beliefs(ds)
            dlp = np.nanmax(np.abs(ds["option_logprob"].values - ref["option_logprob"].values))
            d = tvd(ref_b["belief"].fillna(0), b["belief"].fillna(0), dim="outcome")
            print(f"{dtype}: max |Δ option log-prob| = {dlp:.3f}; belief TVD vs float32 mean "
                  f"{float(d.mean()):.4f} max {float(d.max()):.4f}; time ratio "
                  f"{secs / results['float32'][1]:.2f}")
            ds.close()
        ref.close()


if __name__ == "__main__":
    main()
