"""Peak memory of one forward call against the budget's estimate of it (``run/budget.py``).

``--max-memory`` sizes a forward call from :func:`belieflens.run.budget.call_bytes`. This
measures what one call really takes on SmolLM2-135M: ``rows`` read-outs of ``length``
random tokens each (no shared prefix, so one call of ``rows * length`` padded tokens), run
by the trie runner with each attention path, each in its own process. The peak is the rise
of ``VmHWM`` over the resident size after loading and one warm-up call (``/proc/self/
clear_refs`` resets the mark), so the weights and the allocator's warm pool are apart.

One line per case: ``call attention=... tokens=... length=... peak_mb=... estimate_mb=...
ratio=...`` (ratio = estimate / measured: at least 1 means the budget is not exceeded).
Run: ``.venv/bin/python -m bench.call_memory [--length 2700] [--rows 1 3]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import TYPE_CHECKING, cast

from bench._lib import peak_rss_mb, rss_mb

if TYPE_CHECKING:
    from belieflens.model.attention import AttentionName


def child(attention: AttentionName, rows: int, length: int, threads: int) -> None:
    """Run one call of ``rows`` x ``length`` tokens and print its peak and the estimate."""
    import random

    import torch

    from belieflens.model.load import load
    from belieflens.readouts.render import TokenizedQuery
    from belieflens.run.budget import call_bytes
    from belieflens.run.trie_runner import run_trie

    torch.set_num_threads(threads)
    model = load("smollm2-135m")
    rng = random.Random(0)

    def batch(n: int, s: int) -> list[TokenizedQuery]:
        return [TokenizedQuery(
            context_ids=tuple(rng.randrange(100, 40000) for _ in range(s)),
            option_ids=((11,), (12,)), outcome=(0, 1), context_text="") for _ in range(n)]

    def call(tqs: list[TokenizedQuery]) -> None:
        tokens = sum(len(tq.context_ids) for tq in tqs)
        for _ in run_trie(model, tqs, max_rows=len(tqs), max_tokens=tokens,
                          attention=attention):
            pass

    call(batch(1, 64))  # warm-up: the allocator's first arenas, lazy imports
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    base = rss_mb()
    call(batch(rows, length))
    peak = peak_rss_mb() - base
    est = call_bytes(model, rows * length, length, attention=attention) / 2**20
    print(json.dumps({"attention": attention, "tokens": rows * length, "length": length,
                      "peak_mb": peak, "estimate_mb": est}))


def main() -> None:
    """Each (attention, rows) case in its own process; one line each."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--length", type=int, default=2700, help="tokens per read-out")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--attention", nargs="+", default=["sdpa", "eager"],
                    choices=["sdpa", "eager"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        attention, rows, length = args.child
        child(cast("AttentionName", attention), int(rows), int(length), args.threads)
        return
    for attention in args.attention:
        for rows in args.rows:
            out = subprocess.run(
                [sys.executable, "-m", "bench.call_memory", "--child", attention, str(rows),
                 str(args.length), "--threads", str(args.threads)],
                check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            print(f"call attention={r['attention']} tokens={r['tokens']} length={r['length']} "
                  f"peak_mb={r['peak_mb']:.0f} estimate_mb={r['estimate_mb']:.0f} "
                  f"ratio={r['estimate_mb'] / max(r['peak_mb'], 1e-9):.2f}", flush=True)


if __name__ == "__main__":
    main()
