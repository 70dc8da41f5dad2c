"""Interventions over every layer, three ways: the clean run's cache, blocks l..L-1, naive.

A random Llama with the default model's shape (SmolLM2-135M: 30 layers, d_model 576, MLP
1536, 9 heads of 64, 3 key/value heads) and its tokenizer extracts a small coin-flip study
(``--real``: the embedded model itself). Two workloads run over every layer 0..30:

- **patching** at the answer position, for ``--pairs`` pairs (``--batch-pairs`` a batch);
- **steering** at the answer position, ``--steer-rows`` read-outs (``--batch-rows`` a batch),
  each shifted by ``α·v`` for every α of ``--alphas`` along a random unit vector and a
  second random one (the control), all in one batch per layer as ``steer`` runs them.

Each is timed three ways on the same edited residuals:

- **kv** (:func:`belieflens.interventions.forward.run_edited`, what ``patch``, ``steer`` and
  ``erase`` run): the clean run keeps its key/value cache, and blocks ``l..L-1`` run only
  from each row's first edited position (here its answer position) on;
- **from** (:func:`~belieflens.interventions.forward.run_from`, no cache of the clean run):
  blocks ``l..L-1`` on every position;
- **naive** (:func:`~belieflens.interventions.forward.run_replaced`): one full forward per
  layer, a hook replacing the layer-``l`` residual.

What each path needs is charged to it: the clean runs of the base (with its cache for kv,
without for from) and, for patching, of the source (all three need the source's
residuals). Naive steering is charged no clean run (a hook would add the vector). The
three paths alternate layer by layer in a rotating order (so that load changes on a shared
machine hit all alike), ``--repeats`` times; per repeat the script prints each path's time,
the largest log-prob difference from naive (and the log-prob it is at: float32 rounds a
log-prob of -50 to 4e-6), and the ratios, then the median ratios:
``patch_kv_vs_naive``, ``patch_kv_vs_from``, ``steer_kv_vs_naive``, ``steer_kv_vs_from``
(the goals: >= 4 and >= 3 over naive). ``--clock cpu`` times this process's CPU.

Last line: ``median of N: patch_kv_vs_naive=... patch_kv_vs_from=... steer_kv_vs_naive=...
steer_kv_vs_from=...``.
Run: ``.venv/bin/python -m bench.intervene [--real] [--repeats 3] [--clock cpu --threads 1]``
(about 3 min a repeat with ``--real --steer-rows 1`` on one thread of a 2-core machine).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from bench._lib import (
    intervention_bench,
    now,
    parse_timed,
    write_line_results,
)

PATHS = ("kv", "from", "naive")


class Tally:
    """Seconds charged to each path and the largest log-prob difference from naive."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PATHS, 0.0)
        self.diff = dict.fromkeys(PATHS, 0.0)
        self.at = dict.fromkeys(PATHS, 0.0)

    def timed(self, path: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn``, charging its time to ``path``."""
        t0 = now()
        out = fn()
        self.seconds[path] += now() - t0
        return out

    def layer(self, step: int, runs: dict[str, Callable[[], Any]]) -> None:
        """One layer: the three paths in an order rotated by ``step``, compared to naive."""
        import numpy as np

        order = PATHS[step % 3 :] + PATHS[: step % 3]
        got = {p: self.timed(p, runs[p]) for p in order}
        for p in PATHS:
            d = np.nan_to_num(np.abs(got[p] - got["naive"]), nan=-1.0)
            if d.max() > self.diff[p]:
                i = np.unravel_index(int(d.argmax()), d.shape)
                self.diff[p], self.at[p] = float(d[i]), float(got["naive"][i])

    def report(self, name: str) -> tuple[float, float]:
        """Print the times and ratios; return (kv vs naive, kv vs from)."""
        s = self.seconds
        print(f"  {name}: kv {s['kv']:.1f} s, from {s['from']:.1f} s, naive {s['naive']:.1f} s;"
              f" max |kv - naive| {self.diff['kv']:.1e} (at log-prob {self.at['kv']:.1f}),"
              f" |from - naive| {self.diff['from']:.1e}")
        ratios = (s["naive"] / s["kv"], s["from"] / s["kv"])
        print(f"  {name}_kv_vs_naive={ratios[0]:.2f} {name}_kv_vs_from={ratios[1]:.2f} "
              f"{name}_from_vs_naive={s['naive'] / s['from']:.2f}")
        return ratios


def patch_round(model: Any, study: Any, pairs: Sequence[Any], batch_pairs: int) -> Tally:
    """Answer-position patching of ``pairs`` over every layer, three ways."""
    import torch

    from belieflens.interventions.forward import (
        RowBatch,
        clean_run,
        run_edited,
        run_from,
        run_replaced,
    )
    from belieflens.interventions.pairs import position_masks

    t = Tally()
    for start in range(0, len(pairs), batch_pairs):
        chunk = pairs[start : start + batch_pairs]
        base = RowBatch.of([study.queries[p.base] for p in chunk])
        source = RowBatch.of([study.queries[p.source] for p in chunk])
        masks, where = position_masks(base, source)
        t0 = now()
        cs = clean_run(model, source, keep_cache=False)
        for p in PATHS:
            t.seconds[p] += now() - t0
        cb = t.timed("kv", partial(clean_run, model, base))
        t.timed("from", partial(clean_run, model, base, keep_cache=False))
        mask = torch.tensor(masks["answer"])[:, :, None]
        rows = torch.arange(where.shape[0])[:, None]
        at = torch.as_tensor(where.clip(min=0))
        for layer in range(model.info.n_layers + 1):
            res = torch.where(mask, cs.resid[layer][rows, at], cb.resid[layer])
            t.layer(layer, {"kv": partial(run_edited, model, base, layer, res, cb),
                            "from": partial(run_from, model, base, layer, res),
                            "naive": partial(run_replaced, model, base, layer, res)})
    return t


def steer_round(model: Any, study: Any, rows: Sequence[int], batch_rows: int,
                alphas: Sequence[float]) -> Tally:
    """Answer-position steering of ``rows`` over every layer, three ways."""
    import torch

    from belieflens.interventions.forward import (
        RowBatch,
        at_answer,
        clean_run,
        run_edited,
        run_from,
        run_replaced,
        with_answer,
    )

    t = Tally()
    gen = torch.Generator().manual_seed(0)
    for start in range(0, len(rows), batch_rows):
        batch = RowBatch.of([study.queries[q] for q in rows[start : start + batch_rows]])
        run = t.timed("kv", partial(clean_run, model, batch))
        t.timed("from", partial(clean_run, model, batch, keep_cache=False))
        tiled = batch.tile(2 * len(alphas))
        for layer in range(model.info.n_layers + 1):
            res = run.resid[layer]
            ans = at_answer(res, batch)
            vecs = torch.randn(2, 1, res.shape[-1], generator=gen)
            vecs = vecs / vecs.norm(dim=-1, keepdim=True) * ans.norm(dim=-1).mean()
            res = torch.cat([with_answer(res, batch, ans + a * v)
                             for v in vecs for a in alphas])
            t.layer(layer, {"kv": partial(run_edited, model, tiled, layer, res, run),
                            "from": partial(run_from, model, tiled, layer, res),
                            "naive": partial(run_replaced, model, tiled, layer, res)})
    return t


def main() -> None:
    """Extract a small study, patch and steer it three ways, print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--turns", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--batch-pairs", type=int, default=2)
    ap.add_argument("--steer-rows", type=int, default=2)
    ap.add_argument("--batch-rows", type=int, default=2)
    ap.add_argument("--alphas", type=float, nargs="+", default=[-2.0, 0.0, 2.0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--real", action="store_true", help="the embedded model, not a random one")
    args, recorder = parse_timed(ap)

    import numpy as np

    from belieflens.interventions.pairs import pair_instances
    from belieflens.interventions.readouts import Selection
    from belieflens.model.load import quiet_libraries

    with quiet_libraries():
        model, study = intervention_bench(args.real, args.episodes, turns=args.turns, bins=2)
        pairs = pair_instances(study, Selection(turns=(args.turns,)))[: args.pairs]
        rows = list(range(study.n_query))[: args.steer_rows]
        tokens = np.mean([len(study.queries[p.base].context_ids) for p in pairs])
        print(f"model {model.info.official_id}: {model.info.n_layers} layers, prefix reuse "
              f"{model.info.prefix_reuse}; {len(pairs)} pairs and {len(rows)} read-outs of "
              f"about {tokens:.0f} tokens; {len(args.alphas)} alphas x 2 directions; "
              f"clock {args.clock}, {args.threads} threads")
        ratios: list[tuple[float, float, float, float]] = []
        for r in range(args.repeats):
            print(f"repeat {r + 1}:")
            pk = patch_round(model, study, pairs, args.batch_pairs).report("patch")
            sk = steer_round(model, study, rows, args.batch_rows, args.alphas).report("steer")
            ratios.append((*pk, *sk))
    med = [statistics.median(x[i] for x in ratios) for i in range(4)]
    line = (f"patch_kv_vs_naive={med[0]:.2f} patch_kv_vs_from={med[1]:.2f} "
            f"steer_kv_vs_naive={med[2]:.2f} steer_kv_vs_from={med[3]:.2f}")
    print(f"median of {args.repeats}: {line}")
    write_line_results(recorder, args.results, line)


if __name__ == "__main__":
    main()
