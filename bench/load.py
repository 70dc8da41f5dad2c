"""Model load time after the first load (dequantised weights cached), in fresh processes.

Each run starts a new Python process and measures, separately: importing
torch, transformers and transformer_lens; ``belieflens.model.load.load()`` of
the default model (weights from the dequantised cache, bridge boot, KV-cache and
kernel self-checks); and, within it, reading the weights (``load_seconds``).

Last line: ``load_s=... weights_s=... imports_s=...`` (medians).
Run: ``.venv/bin/python -m bench.load [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, time
t0 = time.perf_counter()
import torch, transformers, transformer_lens.model_bridge
t1 = time.perf_counter()
from belieflens.model.load import load
m = load()
t2 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "load": t2 - t1, "weights": m.info.load_seconds}))
"""


def main() -> None:
    """Run the child ``--runs`` times and print the medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
        rows.append(json.loads(out))
        print(f"imports {rows[-1]['imports']:.2f}s, load() {rows[-1]['load']:.2f}s "
              f"(weights {rows[-1]['weights']:.2f}s)")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"load_s={med['load']:.2f} weights_s={med['weights']:.2f} "
          f"imports_s={med['imports']:.2f}")


if __name__ == "__main__":
    main()
