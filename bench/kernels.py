"""CPU linear kernels: the default GEMM vs oneDNN (``--kernels onednn``), speed and belief error.

Two measurements in one run, each against the default kernels:

1. every projection shape of SmolLM2-135M (576->1536, 1536->576, 576->576,
   576->192) at 64 and 400 tokens: ``nn.Linear`` vs ``torch.utils.mkldnn``'s
   ``MkldnnLinear`` vs the fused ``torch.ops.mkldnn._linear_pointwise`` that
   ``--kernels onednn`` uses (GFLOP/s and ratios);
2. the same coin-flip extraction on the embedded model with each kernel choice:
   wall time ratio, largest option log-prob difference, mean and largest TVD of
   the debiased beliefs, largest residual difference relative to the residual scale.

Last line: ``onednn_extract_speedup=... max_dlogprob=... belief_tvd_max=... resid_rel=...``.
Run: ``.venv/bin/python bench/kernels.py [--episodes 2 --turns 4]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils import mkldnn

import belieflens
import belieflens.envs as envs
from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.divergence import tvd
from belieflens.model.load import load
from belieflens.run.extract import ExtractOptions, extract


def mean_seconds(f: Callable[[], object], repeat: int) -> float:
    """Mean seconds of ``f`` over ``repeat`` calls after one warm-up call."""
    f()
    t0 = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - t0) / repeat


def shapes(repeat: int) -> None:
    """Part 1: the three linear kernels on the model's projection shapes."""
    torch.manual_seed(0)
    with torch.inference_mode():
        for n_in, n_out in [(576, 1536), (1536, 576), (576, 576), (576, 192)]:
            dense = torch.nn.Linear(n_in, n_out, bias=False).eval()
            w = dense.weight
            packed = mkldnn.MkldnnLinear(dense, torch.float32)
            for tokens in (64, 400):
                x = torch.randn(tokens, n_in)
                flop = 2 * tokens * n_in * n_out
                t = [
                    mean_seconds(f, repeat)
                    for f in (
                        lambda: dense(x),  # noqa: B023
                        lambda: packed(x),  # noqa: B023
                        lambda: torch.ops.mkldnn._linear_pointwise(
                            x, w, None, "none", [], ""),  # noqa: B023
                    )
                ]
                print(f"{n_in}->{n_out} x{tokens}: default {flop / t[0] / 1e9:.0f} GFLOP/s, "
                      f"MkldnnLinear x{t[0] / t[1]:.2f}, _linear_pointwise x{t[0] / t[2]:.2f}")


def main() -> None:
    """Run both parts and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    shapes(args.repeat)
    env = envs.get("coin-flip", turns=args.turns, delivery="multi-turn")
    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[str, tuple[Path, float]] = {}
        for kernels in ("default", "onednn", "default", "onednn"):  # twice, interleaved
            model = load("smollm2-135m", kernels=kernels)
            t0 = time.perf_counter()
            path = extract(env, model, Path(tmp) / f"{kernels}.h5",
                           ExtractOptions(episodes=args.episodes), overwrite=True)
            secs = time.perf_counter() - t0
            runs[kernels] = (path, min(secs, runs.get(kernels, (path, secs))[1]))
            del model
        ref, fast = (belieflens.open_cache(runs[k][0]) for k in ("default", "onednn"))
        dlp = float(np.nanmax(np.abs(fast["option_logprob"].values
                                     - ref["option_logprob"].values)))
        d = tvd(output_beliefs(ref)["belief"].fillna(0), output_beliefs(fast)["belief"].fillna(0),
                dim="outcome")
        r0 = ref["resid"].values.astype(np.float64)
        rel = float(np.abs(fast["resid"].values - r0).max() / np.abs(r0).max())
        speedup = runs["default"][1] / runs["onednn"][1]
        print(f"extraction: default {runs['default'][1]:.1f}s, onednn {runs['onednn'][1]:.1f}s "
              f"(best of 2 each); belief TVD mean {float(d.mean()):.2e}")
        print(f"onednn_extract_speedup={speedup:.2f} max_dlogprob={dlp:.1e} "
              f"belief_tvd_max={float(d.max()):.1e} resid_rel={rel:.1e}")
        ref.close()
        fast.close()


if __name__ == "__main__":
    main()
