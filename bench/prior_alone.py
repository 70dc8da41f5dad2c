"""What a taught coin-flip adapter answers before any flip: per stated prior (its mean and its
worth in flips), P(first face next) debiased over the rotations, in both deliveries, beside
the stated mean (there the oracle) and whether the prompt was taught.

With nothing flipped yet the belief is the stated mean, whatever the worth: a model that reads
the prior says it, one that does not says about one half. The prompts are those of episode 0
of seed 301 (validation: apart from the gate seeds, 7001 and up and 9001 and up, and the
training seeds), the faces heads/tails; a taught prompt is marked, not left out, since what
the adapter gives on its own training prompts is the point.

Run: ``.venv/bin/python -m bench.prior_alone smollm2-135m-bayes --snapshots FILE [FILE ...]
[--run DIR] [--means 0.2,0.35,0.5,0.65,0.8,0.25,0.9] [--worths 2,3,8] [--results NAME]``.
Last line: each snapshot's mean distance from the stated mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench._lib import start_results

SEED = 301
COLUMNS = ("model", "stated mean", "worth (flips)", "prompt taught", "single-turn",
           "multi-turn")


def first_face(model: Any, tok: Any, queries: Sequence[Any], keys: frozenset[str]
               ) -> tuple[float, bool]:
    """P(first face next) of ``queries`` (one read-out's rotations), debiased geometrically
    over the rotations as ``analyze`` does, and whether any of their prompts is in ``keys``."""
    import torch

    from belieflens.readouts.render import bos_policy, prompt_key, render

    rows, taught, bos = [], False, bos_policy(tok)
    for q in queries:
        tq = render(tok, q, bos=bos)
        taught |= prompt_key(tq.context_text) in keys
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([tq.context_ids])).logits[0, -1], -1)
        by = np.empty(len(q.outcome))
        by[list(q.outcome)] = [float(lp[o[0]]) for o in tq.option_ids]
        rows.append(by)
    m = np.mean(rows, axis=0)
    return float(np.exp(m[0] - np.logaddexp.reduce(m))), taught


def priors_alone(model: Any, tok: Any, label: str, means: Sequence[str], worths: Sequence[str],
                 keys: frozenset[str]) -> list[list[str]]:
    """One row per stated prior (:data:`COLUMNS`)."""
    from belieflens.envs import get
    from belieflens.run.extract import records

    out = []
    for mean in means:
        for worth in worths:
            env = get("coin-flip", probes="next-flip", prior="stated", prior_means=mean,
                      prior_weights=worth, turns=1)
            recs = [r for r in records(env, 1, SEED) if r.turn == 0]
            p = {d: first_face(model, tok, [r.query for r in recs if r.delivery == d], keys)
                 for d in ("single-turn", "multi-turn")}
            taught = any(t for _, t in p.values())
            out.append([label, mean, worth, "yes" if taught else "no",
                        f"{p['single-turn'][0]:.3f}", f"{p['multi-turn'][0]:.3f}"])
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Print and (``--results``) write the table, the base model first."""
    import torch

    from belieflens.model.load import load_transformers
    from belieflens.train.teach import with_lora
    from bench.teach_curve import load_snapshot, run_config, run_keys, snapshot_parser

    ap = snapshot_parser(__doc__, "adapter weights (step-NNNNN.safetensors) to read in turn")
    ap.add_argument("--means", default="0.2,0.35,0.5,0.65,0.8,0.25,0.9")
    ap.add_argument("--worths", default="2,3,8")
    args = ap.parse_args(argv)
    recorder = start_results(args)
    torch.set_num_threads(args.threads)
    config, _ = run_config(args.name, args.run)
    model, tok, _, _ = load_transformers(config.model)
    keys = run_keys(config, args.run, tok)
    means, worths = args.means.split(","), args.worths.split(",")
    table = priors_alone(model, tok, "base", means, worths, keys)
    model = with_lora(model, config, config.layers).eval()
    params = dict(model.named_parameters())
    summary = []
    for snap in args.snapshots:
        load_snapshot(params, snap)
        found = priors_alone(model, tok, f"{snap.parent.name} {snap.stem}", means, worths,
                             keys)
        table += found
        miss = np.mean([abs(float(r[4]) - float(r[1])) for r in found])
        summary.append(f"{snap.parent.name} {snap.stem}: mean |P - stated mean| {miss:.3f}")
    for r in table:
        print(" | ".join(r))
    print("; ".join(summary))
    if recorder is not None:
        recorder.write(args.results, COLUMNS, table, note=f"base model {config.model}; turn 0 "
                       f"of episode 0 of seed {SEED}, faces heads/tails")


if __name__ == "__main__":
    main()
