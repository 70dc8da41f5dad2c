"""Interchange training (DAS) two ways: the answer position alone through the clean cache,
and every position of the base's context run again.

A random Llama with the default model's shape (SmolLM2-135M: 30 layers, d_model 576; its
tokenizer) extracts a coin-flip study (``--real``: the embedded model itself; ``--model
NAME``: that model, e.g. ``gemma3-270m``, whose sliding layers' cache keeps every position
for this), multi-turn
delivery, next-flip read-outs at the turns of ``--turns``; training pairs are every two
episodes that differ at a turn (``interchange``'s ``any`` pairing). At each layer of
``--layers`` a rank-1 subspace is trained for ``--steps`` steps of ``--batch-pairs`` pairs,
the same seed on both paths:

- **kv** (what ``interchange`` runs where the model's cache can be reused): one clean run of
  each distinct base keeps its key/value cache, and a swap runs only the answer position
  through blocks ``l .. L-1``
  (:func:`belieflens.interventions.forward.answer_logprobs`);
- **full** (the model's cache marked unusable, the path before): the base's residual at
  every position runs again through blocks ``l .. L-1``.

Each path's clean runs and training steps are timed apart; the two alternate layer by layer.
Printed per layer: each path's seconds for both, the largest difference of the two loss
curves and of the learned subspaces' swapped log-probs on the training pairs, and the
training's ratio. Last line: ``step_kv_vs_full=R kv_s_per_step=S full_s_per_step=S
runs_kv_vs_full=R loss_diff=D`` (the training steps' ratio, each path's seconds per step,
the clean runs' ratio, the largest loss difference).
Run: ``.venv/bin/python -m bench.interchange_speed [--real | --model NAME] [--layers 26 10]
[--steps 10] [--episodes 4] [--threads 1] [--results NAME]``.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np

from bench._lib import (
    intervention_bench,
    now,
    parse_timed,
    write_line_results,
)


def train(model: Any, study: Any, pairs: list[Any], layer: int, steps: int,
          batch_pairs: int) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Seconds to build the rows (the clean runs) and to train one subspace; the loss curve;
    the swapped log-probs of the training pairs."""
    from belieflens.interventions import das

    oracle = np.asarray(study.table["oracle"].values)
    outcome = np.asarray(study.table["outcome"].values)
    target = np.stack([oracle[p.source][outcome[p.base][:2]] for p in pairs])
    t0 = now()
    rows = das.layer_rows(model, [study.queries[p.base] for p in pairs],
                          [study.queries[p.source] for p in pairs], target, (layer,))[layer]
    t1 = now()
    basis, loss = das.train_basis(model, rows, layer,
                                  das.Recipe(rank=1, steps=steps, batch_pairs=batch_pairs))
    return t1 - t0, now() - t1, loss, das.swap_logprobs(model, rows, layer, basis)


def main() -> None:
    """Extract a study, train a subspace both ways at each layer, print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--turns", type=int, nargs="+", default=[3, 6, 9])
    ap.add_argument("--layers", type=int, nargs="+", default=[26, 10])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-pairs", type=int, default=64)
    ap.add_argument("--real", action="store_true", help="the embedded model, not a random one")
    ap.add_argument("--model", default=None,
                    help="this model (e.g. gemma3-270m, an optional install), not the embedded "
                         "one")
    args, recorder = parse_timed(ap)

    from belieflens.interventions.readouts import Selection
    from belieflens.interventions.swaps import instance_pairs
    from belieflens.model.load import quiet_libraries

    with quiet_libraries():
        model, study = intervention_bench(args.model or args.real, args.episodes,
                                          turns=max(args.turns),
                                          probes="next-flip")
        plain = dataclasses.replace(model, info=dataclasses.replace(model.info,
                                                                    prefix_reuse=False))
        pairs = instance_pairs(study, Selection(turns=tuple(args.turns)), "any")
        tokens = np.mean([len(study.queries[p.base].context_ids) for p in pairs])
        print(f"model {model.info.official_id}: prefix reuse {model.info.prefix_reuse}; "
              f"{len(pairs)} training pairs of about {tokens:.0f} tokens; {args.steps} steps "
              f"of {args.batch_pairs} pairs; clock {args.clock}, {args.threads} threads")
        runs = {"kv": 0.0, "full": 0.0}
        steps = {"kv": 0.0, "full": 0.0}
        worst = 0.0
        for i, layer in enumerate(args.layers):
            order = [("kv", model), ("full", plain)][:: 1 if i % 2 == 0 else -1]
            got = {name: train(m, study, pairs, layer, args.steps, args.batch_pairs)
                   for name, m in order}
            loss_diff = float(np.abs(got["kv"][2] - got["full"][2]).max())
            lp_diff = float(np.nanmax(np.abs(got["kv"][3] - got["full"][3])))
            worst = max(worst, loss_diff)
            for name in runs:
                runs[name] += got[name][0]
                steps[name] += got[name][1]
            print(f"layer {layer}: clean runs kv {got['kv'][0]:.1f} s, full "
                  f"{got['full'][0]:.1f} s; training kv {got['kv'][1]:.1f} s, full "
                  f"{got['full'][1]:.1f} s (ratio {got['full'][1] / got['kv'][1]:.2f}); max "
                  f"loss diff {loss_diff:.1e}, max swapped log-prob diff {lp_diff:.1e}")
    per_step = {k: v / (args.steps * len(args.layers)) for k, v in steps.items()}
    line = (f"step_kv_vs_full={steps['full'] / steps['kv']:.2f} "
            f"kv_s_per_step={per_step['kv']:.2f} full_s_per_step={per_step['full']:.2f} "
            f"runs_kv_vs_full={runs['full'] / runs['kv']:.2f} loss_diff={worst:.1e}")
    print(line)
    write_line_results(recorder, args.results, line)


if __name__ == "__main__":
    main()
