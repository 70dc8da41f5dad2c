"""Peak memory of ``analyze`` on a study directory at 1x and 4x the study size (it should
stay flat: the analysis reads the dask-backed shards chunk by chunk).

The studies are written by the sharded extraction itself (``belieflens.extract(...,
client="local:1")``) with a random Llama of the default model's residual shape (30
blocks, d_model 576, its 49k vocabulary) but a narrow attention and MLP (as
``bench/memory.py``), saved to a folder so that the Dask worker loads it by path:
coin flip, multi-turn, 10 turns, both probes, every rotation (77 read-outs per episode,
71 KiB of float32 residuals per read-out). Each ``analyze`` (tables, report, plots, the
logit lens and the linear decoders) runs in its own fresh process so that each peak RSS is
its own, with glibc's malloc arenas limited as the CLI limits them
(``--no-arena-limit``: as a script that does not call ``limit_arenas``).

Last line: ``analysis_peak_rss_mb_1x=... analysis_peak_rss_mb_4x=... growth=+x.x%
resid_gb_4x=... resid_over_rss_4x=...``.
Run: ``.venv/bin/python -m bench.analysis_memory [--episodes 90] [--keep DIR]
[--scheduler threads|synchronous] [--no-arena-limit]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._lib import peak_rss_mb, smol_shaped_hf

TURNS = 10


def save_model(folder: Path) -> None:
    """Save the narrow random model and its tokenizer to ``folder`` (a ``--model`` path)."""
    hf, tok = smol_shaped_hf(narrow=True)
    hf.save_pretrained(folder)
    tok.save_pretrained(folder)


def make_study(model_dir: Path, out: Path, episodes: int) -> float:
    """Extract the study into the study directory ``out`` on a one-worker LocalCluster (a
    finished study of the same size kept from an earlier run, ``--keep``, is reused)."""
    import belieflens

    manifest = out / "manifest.json"
    if manifest.exists():
        m = json.loads(manifest.read_text())
        if m["study"]["episodes"] == episodes and all(s["state"] == "done" for s in m["shards"]):
            return 0.0

    t0 = time.perf_counter()
    belieflens.extract("coin-flip", params={"turns": TURNS, "delivery": "multi-turn"},
                       model=str(model_dir), out=out, episodes=episodes, client="local:1",
                       shard_episodes=max(1, episodes // 8))
    return time.perf_counter() - t0


def analyze_child(study: Path, report: Path, scheduler: str, arenas: bool) -> None:
    """Analyse ``study`` in this process under dask's ``scheduler`` and print one JSON line
    (peak RSS, wall, resid bytes)."""
    import dask
    import h5py

    from belieflens.api import analyze
    from belieflens.heap import limit_arenas

    if arenas:
        limit_arenas()  # as `belieflens analyze` does at start

    t0 = time.perf_counter()
    with dask.config.set(scheduler=scheduler):
        analyze(study, report, decoders=True)
    wall = time.perf_counter() - t0
    peak = peak_rss_mb()
    resid = readouts = 0
    for shard in sorted(study.glob("shard-*.h5")):
        with h5py.File(shard, "r") as h:
            resid += int(h["resid"].size) * h["resid"].dtype.itemsize
            readouts += int(h["resid"].shape[0])
    print(json.dumps({"peak_rss_mb": peak, "wall_s": wall, "resid_bytes": resid,
                      "readouts": readouts}))


def main() -> None:
    """Write the 1x and 4x studies, analyse each in a fresh process, compare the peaks."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=90, help="episodes of the 1x study")
    ap.add_argument("--keep", type=Path, help="folder to keep the studies in (else a temp dir)")
    ap.add_argument("--scheduler", choices=("threads", "synchronous"), default="threads",
                    help="dask scheduler of the analysis (threads: chunks in parallel)")
    ap.add_argument("--no-arena-limit", action="store_true",
                    help="leave glibc's malloc arenas unlimited (the CLI limits them)")
    ap.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        analyze_child(args.child[0], args.child[1], args.scheduler, not args.no_arena_limit)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        model_dir = root / "model"
        if not (model_dir / "config.json").exists():
            save_model(model_dir)
        res = []
        for scale in (1, 4):
            study = root / f"study-{scale}x"
            seconds = make_study(model_dir, study, args.episodes * scale)
            line = subprocess.run(
                [sys.executable, "-m", "bench.analysis_memory", "--child", str(study),
                 str(root / f"report-{scale}x"), "--scheduler", args.scheduler]
                + (["--no-arena-limit"] if args.no_arena_limit else []),
                check=True, capture_output=True, text=True,
            ).stdout.strip().splitlines()[-1]
            r = json.loads(line)
            res.append(r)
            print(f"{scale}x: {r['readouts']} read-outs, resid "
                  f"{r['resid_bytes'] / 2**30:.2f} GiB (extracted in {seconds:.0f}s); analyze "
                  f"peak RSS {r['peak_rss_mb']:.0f} MB, wall {r['wall_s']:.1f}s", flush=True)
    a, b = res
    growth = 100 * (b["peak_rss_mb"] / a["peak_rss_mb"] - 1)
    ratio = b["resid_bytes"] / 2**20 / b["peak_rss_mb"]
    print(f"analysis_peak_rss_mb_1x={a['peak_rss_mb']:.0f} "
          f"analysis_peak_rss_mb_4x={b['peak_rss_mb']:.0f} growth={growth:+.1f}% "
          f"resid_gb_4x={b['resid_bytes'] / 1e9:.2f} resid_over_rss_4x={ratio:.1f}")


if __name__ == "__main__":
    main()
