"""Interchange patching: a full layer sweep with reuse against one full forward per patch.

A random Llama with the default model's shape (SmolLM2-135M: 30 layers, d_model 576, MLP
1536, 9 heads of 64, 3 key/value heads) and its tokenizer extracts a small coin-flip study;
then every layer 0..30 and every position set (answer, evidence, all) is patched for
``--pairs`` pairs, twice:

- (a) as :func:`belieflens.interventions.patch_logprobs` runs it: one clean run of base and
  source per batch of pairs, then blocks ``l..L-1`` only on the patched residual, the
  position sets of a layer batched;
- (b) naive: one full forward per (pair, layer, position set), a hook replacing the
  layer-``l`` residual with the patched one (the source's residual cached once per pair),
  run with the same batching.

The two paths alternate layer by layer on the same patched residuals (so that load changes
on a shared machine hit both alike). Prints both wall times, the largest difference between
their log-probs, and ``speedup_vs_naive=``. ``--real`` uses the embedded model itself
instead (slower to load).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repository root on the path, as -m has it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._lib import smol_shaped_random


def random_model() -> Any:
    """SmolLM2-135M's shape with its real widths, random weights, default CPU kernels."""
    return smol_shaped_random(narrow=False, kernels="default")


def main() -> None:
    """Extract a small study, patch it both ways, print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--turns", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--batch-pairs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--real", action="store_true", help="the embedded model, not a random one")
    args = ap.parse_args()

    import numpy as np
    import torch

    import belieflens.envs as envs
    from belieflens.interventions.forward import RowBatch, clean_run, run_from, run_replaced
    from belieflens.interventions.pairs import POSITION_SETS, pair_instances, position_masks
    from belieflens.interventions.study import Selection, read_study
    from belieflens.model.load import load, quiet_libraries
    from belieflens.run.extract import ExtractOptions, extract

    torch.set_num_threads(args.threads)
    with quiet_libraries():
        model = load("smollm2-135m", kernels="default") if args.real else random_model()
    env = envs.get("coin-flip", turns=args.turns, bins=2, delivery="multi-turn")
    with tempfile.TemporaryDirectory() as tmp:
        path = extract(env, model, Path(tmp) / "study.h5",
                       ExtractOptions(episodes=args.episodes, seed=0))
        study = read_study(path)
    pairs = pair_instances(study, Selection(turns=(args.turns,)))[: args.pairs]
    tokens = sum(len(study.queries[p.base].context_ids) for p in pairs)
    n_layers = model.info.n_layers
    print(f"model {model.info.official_id}: {n_layers} layers; {len(pairs)} pairs, "
          f"{tokens / len(pairs):.0f} tokens each; {n_layers + 1} layers x 3 position sets")
    # The two paths alternate layer by layer on the same inputs, so that a change in the
    # machine's load during the run hits both alike.

    t_reuse = t_naive = 0.0
    diff = 0.0
    for start in range(0, len(pairs), args.batch_pairs):
        chunk = pairs[start : start + args.batch_pairs]
        base = RowBatch.of([study.queries[p.base] for p in chunk])
        source = RowBatch.of([study.queries[p.source] for p in chunk])
        masks, where = position_masks(base, source)
        t0 = time.perf_counter()
        cs = clean_run(model, source)  # both paths need the source's residuals once
        t_src = time.perf_counter() - t0
        t0 = time.perf_counter()
        cb = clean_run(model, base)  # only the reuse path needs the base's
        t_reuse += t_src + time.perf_counter() - t0
        t_naive += t_src
        tiled = base.tile(len(POSITION_SETS))
        mask = torch.tensor(np.concatenate([masks[s] for s in POSITION_SETS]))[:, :, None]
        for layer in range(n_layers + 1):
            k = len(POSITION_SETS)
            aligned = cs.resid[layer][torch.arange(where.shape[0])[:, None],
                                      torch.as_tensor(np.maximum(where, 0))]  # by role
            resid = torch.where(mask, aligned.repeat(k, 1, 1), cb.resid[layer].repeat(k, 1, 1))
            t0 = time.perf_counter()
            a = run_from(model, tiled, layer, resid)
            t_reuse += time.perf_counter() - t0
            t0 = time.perf_counter()
            b = run_replaced(model, tiled, layer, resid)
            t_naive += time.perf_counter() - t0
            diff = max(diff, float(np.nanmax(np.abs(a - b))))
    print(f"(a) reuse (clean base + source runs, blocks l..L-1 per layer): {t_reuse:.1f} s")
    print(f"(b) naive (clean source run, one full forward per pair x layer x set): "
          f"{t_naive:.1f} s")
    print(f"max |a - b| log-prob: {diff:.2e}")
    print(f"speedup_vs_naive={t_naive / t_reuse:.2f}")


if __name__ == "__main__":
    main()
