"""CPU linear kernels: the default dense path vs oneDNN (``torch.utils.mkldnn``).

For each projection shape of SmolLM2-135M (576->1536, 1536->576, 576->576, 576->192)
and a short (20) and long (400) token count, times ``nn.Linear`` and
``MkldnnLinear`` in the same run and prints the speed ratio and the largest
difference. On the machines this project runs on the default path already
reaches the same kernels, so the ratio is about 1: belieflens does not swap
kernels (see README, Performance).

Last line: ``mkldnn_speedup_min=... mkldnn_speedup_max=... max_abs_diff=...``.
Run: ``.venv/bin/python bench/kernels.py``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from torch.utils import mkldnn


def best_of(f: Callable[[], object], repeat: int) -> float:
    """Mean seconds of ``f`` over ``repeat`` calls after one warm-up call."""
    f()
    t0 = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - t0) / repeat


def main() -> None:
    """Time both kernels on every shape and print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ratios: list[float] = []
    worst = 0.0
    with torch.inference_mode():
        for n_in, n_out in [(576, 1536), (1536, 576), (576, 576), (576, 192)]:
            dense = torch.nn.Linear(n_in, n_out, bias=False).eval()
            fast = mkldnn.MkldnnLinear(dense, torch.float32)
            for tokens in (20, 400):
                x = torch.randn(tokens, n_in)
                t_dense = best_of(lambda: dense(x), args.repeat)  # noqa: B023
                t_fast = best_of(lambda: fast(x), args.repeat)  # noqa: B023
                diff = float((dense(x) - fast(x)).abs().max())
                worst = max(worst, diff)
                ratios.append(t_dense / t_fast)
                print(f"{n_in}->{n_out} x{tokens}: dense {t_dense * 1e3:.3f} ms, "
                      f"oneDNN {t_fast * 1e3:.3f} ms, speedup {t_dense / t_fast:.2f}, "
                      f"max |diff| {diff:.1e}")
    print(f"mkldnn_speedup_min={min(ratios):.2f} mkldnn_speedup_max={max(ratios):.2f} "
          f"max_abs_diff={worst:.1e}")


if __name__ == "__main__":
    main()
