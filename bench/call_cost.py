"""The fixed cost of one forward call through the bridge, in tokens.

Times bridge forwards of one row of n = 8, 32, 64, 128, 256 fresh tokens
(logits at the last position, as extraction runs) and fits
``seconds = fixed + per_token * n``. The ratio ``fixed / per_token`` is the cost
of one extra call expressed in tokens: the radix-tree scheduler's
``call_tokens`` (:func:`belieflens.run.trie.schedule`, default 60) trades it
against padding when it cuts a level into batches.

Last line: ``call_tokens=... fixed_ms=... per_token_ms=...``.
Run: ``.venv/bin/python bench/call_cost.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from belieflens.model.load import load


def main() -> None:
    """Time the forwards and print the fit."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load(args.model)
    gen = torch.Generator().manual_seed(0)
    sizes = [8, 32, 64, 128, 256]
    secs = []
    with torch.inference_mode():
        for n in sizes:
            ids = torch.randint(0, loaded.info.vocab_size, (1, n), generator=gen)
            loaded.bridge(ids, logits_to_keep=1)
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                loaded.bridge(ids, logits_to_keep=1)
                best = min(best, time.perf_counter() - t0)
            secs.append(best)
            print(f"{n:4d} tokens: {best * 1e3:.1f} ms")
    per_token, fixed = np.polyfit(sizes, secs, 1)
    print(f"call_tokens={fixed / per_token:.0f} fixed_ms={fixed * 1e3:.1f} "
          f"per_token_ms={per_token * 1e3:.2f}")


if __name__ == "__main__":
    main()
