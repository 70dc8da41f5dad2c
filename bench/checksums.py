"""What per-chunk checksums cost: extraction wall time, HDF5 write time, file size, reads.

Extracts the same study twice per repeat in one process, with checksums (the
default: Fletcher-32 on every numeric chunk, :mod:`belieflens.store.integrity`)
and without (the storage of files written before checksums, ``create_partial(...,
checksums=False)``), alternating which goes first. Then reads every ``resid``
value of each file through ``belieflens.open_cache`` and times
``integrity.check_file`` (the read pass of ``info --verify``). The model is
``bench/memory.py``'s random Llama with the default model's residual shape (30
layers, d_model 576, 49k vocabulary; narrow attention and MLP): the bytes written
per read-out are those of SmolLM2-135M. Workload: coin flip, multi-turn, 10 turns,
both probes, every rotation (70 read-outs per episode).

First, storage alone (``--storage-rows``, default 4,096 read-outs of that shape
written window by window through ``create_partial``/``PartialFile``, then ``resid``
read back with h5py; medians of 5): ``storage_write_ratio=... storage_read_ratio=...``.

Last line: ``wall_ratio=... write_ratio=... size_ratio=... read_ratio=...`` (with /
without checksums; wall and write times are medians over repeats).
Run: ``.venv/bin/python -m bench.checksums [--episodes 15] [--repeats 2]
[--storage-only]``.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._lib import WriteTimer, smol_shaped_random


def _model(threads: int) -> Any:
    import torch

    torch.set_num_threads(threads)
    return smol_shaped_random(narrow=True)


def _run(model: Any, out: Path, episodes: int, checksums: bool) -> dict[str, float]:
    import belieflens.envs as envs
    import belieflens.run.extract as extract_mod
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache
    from belieflens.store.file import create_partial

    env = envs.get("coin-flip", turns=10, delivery="multi-turn")
    setattr(extract_mod, "create_partial",  # noqa: B010 (not an attribute mypy knows)
            functools.partial(create_partial, checksums=checksums))
    try:
        with WriteTimer() as w:
            t0 = time.perf_counter()
            write_cache(env, model, out, ExtractOptions(episodes=episodes))
            wall = time.perf_counter() - t0
    finally:
        setattr(extract_mod, "create_partial", create_partial)  # noqa: B010
    return {"wall_s": wall, "write_s": w.seconds, "bytes": float(out.stat().st_size)}


def _read(path: Path) -> tuple[float, float]:
    import numpy as np

    from belieflens import open_cache
    from belieflens.store.integrity import check_file

    t0 = time.perf_counter()
    with open_cache(path) as ds:
        np.asarray(ds["resid"].values)
    read = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert check_file(path) == []
    return read, time.perf_counter() - t0


def _storage(n: int, repeats: int) -> dict[bool, dict[str, float]]:
    """Storage alone: write ``n`` read-outs of the real shape window by window (synced) and
    read ``resid`` back, with and without checksums; medians over ``repeats``."""
    import h5py
    import numpy as np

    from belieflens.store.file import PartialFile, Sizes, create_partial, partial_path

    sizes = Sizes(query=n, layer=31, d_model=576, token=8, option=2, cont_token=1,
                  outcome=2, lens_token=4)
    rows = np.random.default_rng(0).standard_normal((1024, 31, 576)).astype(np.float32)
    times: dict[bool, dict[str, list[float]]] = {
        on: {"write_s": [], "read_s": []} for on in (True, False)}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                out = Path(tmp) / f"s{on}{i}.h5"
                t0 = time.perf_counter()
                create_partial(out, sizes, {}, static={}, row_slabs=[], checksums=on)
                writer = PartialFile(partial_path(out))
                for a in range(0, n, 1024):
                    b = min(a + 1024, n)
                    writer.write_rows(a, {"resid": rows[: b - a],
                                          "option_logprob": np.zeros((b - a, 2)),
                                          "answer_lse": np.zeros(b - a)})
                times[on]["write_s"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                with h5py.File(partial_path(out), "r") as h:
                    h["resid"][...]
                times[on]["read_s"].append(time.perf_counter() - t0)
                partial_path(out).unlink()
    return {on: {k: statistics.median(v) for k, v in t.items()} for on, t in times.items()}


def main() -> None:
    """Extract with and without checksums, read both files back, print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--storage-rows", type=int, default=4096,
                    help="read-outs of the storage-only measurement (0: skip)")
    ap.add_argument("--storage-only", action="store_true", help="skip the extractions")
    args = ap.parse_args()
    if args.storage_rows:
        st = _storage(args.storage_rows, 5)
        mb = args.storage_rows * 31 * 576 * 4 / 1e6
        print(f"storage only, {args.storage_rows} read-outs ({mb:.0f} MB of resid), medians of "
              f"5: write+sync {st[True]['write_s']:.3f}s / {st[False]['write_s']:.3f}s, "
              f"read resid {st[True]['read_s']:.3f}s / {st[False]['read_s']:.3f}s "
              "(with / without checksums)")
        print(f"storage_write_ratio={st[True]['write_s'] / st[False]['write_s']:.2f} "
              f"storage_read_ratio={st[True]['read_s'] / st[False]['read_s']:.2f}", flush=True)
    if args.storage_only:
        return
    model = _model(args.threads)
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        _run(model, Path(tmp) / "warmup.h5", 1, True)  # first-call costs, timed by neither
        for i in range(args.repeats):
            order = (True, False) if i % 2 == 0 else (False, True)
            for on in order:
                out = Path(tmp) / f"{'on' if on else 'off'}{i}.h5"
                r = _run(model, out, args.episodes, on)
                r["read_s"], r["verify_s"] = _read(out)
                runs[on].append(r)
                print(f"checksums {'on ' if on else 'off'}: wall {r['wall_s']:.1f}s, "
                      f"HDF5 writes {r['write_s']:.2f}s, {r['bytes'] / 1e6:.2f} MB, "
                      f"read resid {r['read_s']:.3f}s, check every chunk {r['verify_s']:.3f}s",
                      flush=True)

    def med(on: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[on])

    n = args.episodes * 70
    print(f"{n} read-outs; medians with / without checksums: wall {med(True, 'wall_s'):.1f}s / "
          f"{med(False, 'wall_s'):.1f}s, writes {med(True, 'write_s'):.2f}s / "
          f"{med(False, 'write_s'):.2f}s, size {med(True, 'bytes') / 1e6:.2f} MB / "
          f"{med(False, 'bytes') / 1e6:.2f} MB")
    print(f"wall_ratio={med(True, 'wall_s') / med(False, 'wall_s'):.3f} "
          f"write_ratio={med(True, 'write_s') / med(False, 'write_s'):.2f} "
          f"size_ratio={med(True, 'bytes') / med(False, 'bytes'):.5f} "
          f"read_ratio={med(True, 'read_s') / med(False, 'read_s'):.2f}")


if __name__ == "__main__":
    main()
