"""The device path on a CUDA machine: equality checks and throughput of the default model.

On ``--device cuda`` (float32 and bfloat16) it runs a small coin-flip study's read-outs
(1) batched vs one by one (whole prompts, ``--no-prefix-reuse``) and (2) over the token
radix tree vs whole prompts, and prints the largest differences of option log-probs and
residuals (residuals relative to their scale); (3) extracts the study in float32 and in
bfloat16 and prints the belief error of bfloat16 (TVD of debiased output beliefs); (4)
prints tokens/s at several batch sizes (whole prompts); (5) prints generation throughput in
float32, new tokens/s one text at a time (the first ``--gen-one`` prompts) and decoded
together (``--gen-calls`` prompts, ``--gen-rows`` rows a batch: what ``--gen-batch`` caps),
every text ``--gen-tokens`` long, and how many greedy texts the two agree on token for
token. Exits 1 if float32 differences exceed 1e-3 (log-probs).

NOT RUN YET: no GPU was lent to the session that wrote it, so it has never run on hardware.
Run: ``.venv/bin/python -m bench.gpu [--model smollm2-135m --episodes 2 --turns 4]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def readouts(model: Any, tqs: Any, *, max_rows: int, reuse: bool) -> tuple[np.ndarray,
                                                                        np.ndarray, int]:
    """Option log-probs ``[n, option]``, residuals ``[n, layer, d_model]`` and tokens."""
    from belieflens.run import runner
    n = len(tqs)
    width = max(len(tq.option_ids) for tq in tqs)
    lp = np.full((n, width), np.nan)
    resid: list[np.ndarray | None] = [None] * n
    tokens = 0
    for batch, outs, n_tok in runner.run_queries(model, tqs, max_rows=max_rows,
                                                 max_tokens=1 << 20, reuse_prefix=reuse):
        tokens += n_tok
        for i, o in zip(batch, outs, strict=True):
            lp[i, : len(o.option_logprob)] = o.option_logprob
            resid[i] = np.asarray(o.resid, dtype=np.float32)
    return lp, np.stack([r for r in resid if r is not None]), tokens


def generation_throughput(model: Any, args: argparse.Namespace) -> None:
    """New tokens/s one text at a time and decoded together, and their greedy agreement."""
    import torch

    from belieflens.episodes.base import Message
    from belieflens.run.generate import GenerationCall, generate
    from belieflens.run.generate_batch import generate_batch

    calls = [GenerationCall((Message("user", f"Describe animal number {i} of the savanna, "
                                              "its habits and what it eats."),),
                            seed=i, max_new_tokens=args.gen_tokens, temperature=0.0)
             for i in range(args.gen_calls)]
    no_stop: frozenset[int] = frozenset()  # every text runs its whole length
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    alone = [generate(model, c.messages, seed=c.seed, max_new_tokens=c.max_new_tokens,
                      temperature=0.0, stop_ids=no_stop) for c in calls[: args.gen_one]]
    torch.cuda.synchronize()
    one_rate = sum(len(g.ids) for g in alone) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    together = generate_batch(model, calls, max_rows=args.gen_rows, stop_ids=no_stop)
    torch.cuda.synchronize()
    rate = sum(len(g.ids) for g in together) / (time.perf_counter() - t0)
    same = sum(a.ids == b.ids for a, b in zip(alone, together, strict=False))
    print(f"float32 generation: batch 1 {one_rate:,.1f} new tokens/s; batch {args.gen_rows} "
          f"{rate:,.1f} new tokens/s ({rate / one_rate:.1f}x); greedy texts equal "
          f"{same}/{len(alone)}")


def main() -> int:
    """Run the checks and print the figures; 1 if a float32 check fails."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--gen-calls", type=int, default=64, help="prompts generated together")
    ap.add_argument("--gen-one", type=int, default=8, help="of them, generated one at a time")
    ap.add_argument("--gen-rows", type=int, default=64, help="rows per generation batch")
    ap.add_argument("--gen-tokens", type=int, default=128, help="new tokens per text")
    args = ap.parse_args()
    import torch

    import belieflens
    from belieflens.analysis import tvd
    from belieflens.envs import get
    from belieflens.run.extract import ExtractOptions, prepare
    from belieflens.types import DTypeName

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 2
    print(f"device: {torch.cuda.get_device_name(0)}")
    env = get("coin-flip", turns=args.turns)
    ok = True
    dtypes: tuple[DTypeName, ...] = ("float32", "bfloat16")
    for dtype in dtypes:
        model = belieflens.load(args.model, device="cuda", dtype=dtype)
        tqs = prepare(env, model, ExtractOptions(episodes=args.episodes)).tqs
        base_lp, base_r, _ = readouts(model, tqs, max_rows=1, reuse=False)
        scale = float(np.abs(base_r).max())
        for name, rows, reuse in (("batched", 16, False), ("trie", 16, True)):
            lp, r, _ = readouts(model, tqs, max_rows=rows, reuse=reuse)
            d_lp = float(np.nanmax(np.abs(lp - base_lp)))
            d_r = float(np.abs(r - base_r).max()) / scale
            print(f"{dtype} {name} vs one by one: option log-prob {d_lp:.2e}, "
                  f"residual {d_r:.2e} of scale")
            ok = ok and (dtype != "float32" or d_lp <= 1e-3)
        if dtype == "float32":
            for bs in args.batch_sizes:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                _, _, tokens = readouts(model, tqs, max_rows=bs, reuse=False)
                torch.cuda.synchronize()
                print(f"float32 batch {bs}: {tokens / (time.perf_counter() - t0):,.0f} tokens/s")
            generation_throughput(model, args)
        del model
        torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as tmp:
        beliefs = {}
        for dtype in dtypes:
            path = belieflens.extract(env, out=Path(tmp) / f"{dtype}.h5", model=args.model,
                                      episodes=args.episodes, device="cuda", dtype=dtype)
            with belieflens.open_cache(path) as ds:
                beliefs[dtype] = ds.bl.beliefs().load()
        err = tvd(beliefs["float32"], beliefs["bfloat16"], dim="outcome")
        print(f"bfloat16 belief error: TVD mean {float(err.mean()):.4f} "
              f"max {float(err.max()):.4f}")
    print("ok" if ok else "FAILED: float32 differences above 1e-3")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
