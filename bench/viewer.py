"""Page weight and open time of the study viewer (``study.html``) for the demo study and for a
synthetic study of 100,000 read-outs.

Each study is analysed as ``analyze --out`` does (linear decoders skipped: they change the page
by a few printed lines), then its page is opened from disk in Debian's headless Chromium
(Playwright, ``executable_path=/usr/bin/chromium``, a fresh profile each time) and timed from
navigation to the viewer's first complete draw (``window.blReady``), as the wall clock of
the test driver and as the page's own ``performance.now()`` (and how much of it passes before
the viewer's script starts: parsing the HTML and running plotly.js); the median of
``--repeats`` opens, with the machine's load average printed beside them. For a study whose
slices are written beside the page, the time to show an episode loaded from there is timed
too.

The synthetic study has the demo's shape at a larger scale: coin-flip-like read-outs (2
deliveries, 2 two-outcome probes, 11 turns, 2 rotations: 88 read-outs per episode, 1,137
episodes = 100,056 read-outs), 31 layers (SmolLM2-135M's), contexts of 60 + 10 x turn tokens
over a 500-token vocabulary with recorded token text; residuals of width 8 (the page holds
no residual: only the lens beliefs per layer computed from them, so their width does not
change the page) keep the file at ~0.2 GB.

Run: ``.venv/bin/python -m bench.viewer [--demo runs/demo/coin-flip.h5] [--reads 100000]
[--repeats 3] [--keep DIR]``. Lines: ``demo: page_mb=... open_s=... ...`` and ``100k: ...``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TURNS, ROTATIONS, LAYERS, D_MODEL, VOCAB = 11, 2, 31, 8, 500
PROBES = (("bias", ("0.00 to 0.50", "0.50 to 1.00")), ("next-flip", ("heads", "tails")))
DELIVERIES = ("multi-turn", "single-turn")


def _grid(episodes: int) -> dict[str, np.ndarray]:
    """Every read-out's keys, in episode-major order."""
    e, d, p, t, r = np.meshgrid(np.arange(episodes), np.arange(len(DELIVERIES)),
                                np.arange(len(PROBES)), np.arange(TURNS), np.arange(ROTATIONS),
                                indexing="ij")
    return {k: v.reshape(-1) for k, v in zip("edptr", (e, d, p, t, r), strict=True)}


def _rows(keys: dict[str, np.ndarray], a: int, b: int, n_tok: int,
          rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The static per-query variables of read-outs ``a:b``."""
    n = b - a
    t, r, p, d = keys["t"][a:b], keys["r"][a:b], keys["p"][a:b], keys["d"][a:b]
    length = 60 + 10 * t
    ids = rng.integers(0, VOCAB, size=(n, n_tok)).astype(np.int32)
    ids[np.arange(n_tok)[None, :] >= length[:, None]] = -1
    heads = np.clip(0.5 + 0.04 * (t - 5) + rng.normal(0, 0.05, n), 0.01, 0.99)
    oracle = np.stack([1 - heads, heads], axis=1)
    outcome = np.stack([r, 1 - r], axis=1).astype(np.int32)
    labels = np.array([PROBES[i][1] for i in p], dtype=object)
    return {
        "input_ids": ids, "answer_pos": (length - 1).astype(np.int32),
        "option_ids": np.stack([VOCAB - 2 + outcome, np.full_like(outcome, -1)], axis=2),
        "option_lens_index": np.stack([outcome, np.full_like(outcome, -1)], axis=2),
        "outcome": outcome, "outcome_label": labels, "oracle": oracle,
        "n_outcome": np.full(n, 2, dtype=np.int32),
        "prompt": np.array([""] * n, dtype=object),
        "episode": keys["e"][a:b].astype(np.int32), "turn": t.astype(np.int32),
        "rotation": r.astype(np.int32),
        "probe": np.array([PROBES[i][0] for i in p], dtype=object),
        "kind": np.array(["mcq"] * n, dtype=object), "env": np.array(["coin-flip"] * n, object),
        "delivery": np.array([DELIVERIES[i] for i in d], dtype=object),
    }


def synthetic_study(out: Path, reads: int, seed: int = 0) -> Path:
    """Write a complete, checksummed cache file of about ``reads`` read-outs."""
    from belieflens.store.file import PartialFile, Sizes, create_partial, partial_path

    per_episode = len(DELIVERIES) * len(PROBES) * TURNS * ROTATIONS
    episodes = -(-reads // per_episode)
    keys = _grid(episodes)
    n = keys["e"].size
    n_tok = 60 + 10 * (TURNS - 1)
    rng = np.random.default_rng(seed)
    sizes = Sizes(query=n, layer=LAYERS, d_model=D_MODEL, token=n_tok, option=2, cont_token=2,
                  outcome=2, lens_token=2, text_token=VOCAB)
    attrs = {"model_id": "synthetic", "env_name": "coin-flip", "env_params": '{"turns": 10}',
             "episodes": episodes, "seed": seed, "final_norm_kind": "rms",
             "final_norm_eps": 1e-6}
    step = 4096

    def slabs() -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for a in range(0, n, step):
            yield a, _rows(keys, a, min(a + step, n), n_tok, rng)

    create_partial(out, sizes, attrs, static={
        "lens_token_id": np.array([VOCAB - 2, VOCAB - 1], dtype=np.int32),
        "unembed": rng.normal(0, 1, (2, D_MODEL)).astype(np.float32),
        "unembed_bias": np.zeros(2, dtype=np.float32),
        "final_norm_gain": np.ones(D_MODEL), "final_norm_bias": np.zeros(D_MODEL),
        "token_text_id": np.arange(VOCAB, dtype=np.int32),
        "token_text": np.array([f" w{i}" for i in range(VOCAB)], dtype=object),
    }, row_slabs=slabs(), rows_per_chunk=64)
    writer = PartialFile(partial_path(out))
    for a in range(0, n, step):
        b = min(a + step, n)
        lp = np.log(rng.dirichlet((2.0, 2.0), size=b - a))
        writer.write_rows(a, {
            "resid": rng.normal(0, 1, (b - a, LAYERS, D_MODEL)).astype(np.float32),
            "option_logprob": lp, "answer_lse": np.zeros(b - a)})
    return writer.finish(out)


def _open_times(html: Path, repeats: int,
                episode: str | None) -> tuple[float, float, float, float]:
    """Median seconds to the first draw (driver's clock, page's clock), of it before the
    viewer's script starts (HTML and plotly.js parsed and run) and, with ``episode``, to show
    that episode (loaded from beside the page)."""
    from tests.report.browser import chromium, open_page

    wall, own, before, switch = [], [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as prof, chromium(Path(prof)) as ctx:
            opened = open_page(ctx, html, timeout_ms=120_000)
            assert not opened.errors and not opened.requests, (opened.errors, opened.requests)
            wall.append(opened.seconds)
            own.append(float(opened.page.evaluate("window.blReadyMs")) / 1000)
            before.append(float(opened.page.evaluate("window.blAppStart")) / 1000)
            if episode is not None:
                t0 = time.perf_counter()
                opened.page.select_option("#episode", label=episode)
                opened.page.wait_for_function(
                    "document.querySelector('#belief-table caption').textContent"
                    f".includes('episode {episode},')", timeout=60_000)
                switch.append(time.perf_counter() - t0)
    return (statistics.median(wall), statistics.median(own), statistics.median(before),
            statistics.median(switch) if switch else float("nan"))


def measure(name: str, study: Path, out: Path, repeats: int) -> None:
    """Analyse ``study`` into ``out`` and print its page's weight and open time."""
    from belieflens.api import analyze

    t0 = time.perf_counter()
    res = analyze(study, out, decoders=False)
    analyse_s = time.perf_counter() - t0
    html = out / "study.html"
    folder = out / "study_files"
    beside = sum(f.stat().st_size for f in folder.iterdir()) if folder.is_dir() else 0
    n_files = len(list(folder.iterdir())) if folder.is_dir() else 0
    last = str(res.text.split("viewer study.html: ")[-1].splitlines()[0])
    episode = None
    if n_files:
        episode = max(folder.iterdir(), key=lambda f: int(f.stem.split("-")[1])).stem.split("-")[1]
    wall, own, before, switch = _open_times(html, repeats, episode)
    import os

    print(f"{name}: note: {last}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{name}: page_mb={html.stat().st_size / 1e6:.2f} open_s={wall:.2f} "
          f"page_clock_s={own:.2f} before_script_s={before:.2f} slices_beside={n_files} "
          f"slices_mb={beside / 1e6:.1f} "
          f"lazy_episode_s={switch:.2f} analyze_s={analyse_s:.0f}", flush=True)


def main() -> None:
    """Measure the demo study's page and a synthetic 100,000-read-out study's page."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", type=Path, default=ROOT / "runs" / "demo" / "coin-flip.h5")
    ap.add_argument("--reads", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the pages here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        if args.demo.exists():
            measure("demo", args.demo, base / "demo", args.repeats)
        else:
            print(f"demo: {args.demo} not found (make demo writes it); skipped")
        study = base / "synthetic-100k.h5"
        if not study.exists():
            synthetic_study(study, args.reads)
        measure(f"{args.reads // 1000}k", study, base / "synthetic", args.repeats)


if __name__ == "__main__":
    main()
