"""The learning curve of a taught adapter: held-out updating slope and output TVD of the
base model and of the adapter's snapshots (``python -m bench.teach_ship --snapshots DIR``).

Held-out coin-flip episodes (``turns=10``, seed 0; the adapters were taught on seed
1,000,000,000) are rendered as teaching's read-out trees (:mod:`belieflens.train.teach_data`:
the read-outs ``extract`` renders, every rotation and delivery); the frozen blocks below the
adapted ones run once for all models (the trunk), then each snapshot's adapted blocks give
every read-out's option log-probabilities, within 1e-4 of what ``extract`` stores (tested in
``tests/train/test_teach_data.py``). Beliefs are debiased geometrically over the rotations, as
``analyze`` does; printed per delivery: the next-flip updating slope against the oracle (±
SE clustered by episode), the next-flip and bias output TVD to the oracle and to the
adapter's own target (the tempered posterior); before that, teaching's loss (the mean KL per
read-out from the target) on the read-outs and, with ``--run DIR`` (the run's output
folder), the training loss logged between one snapshot and the next.

Run: ``.venv/bin/python -m bench.teach_curve smollm2-135m-bayes --snapshots DIR [--episodes 4]
[--run DIR]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from belieflens.analysis.compare import updating_slope
from belieflens.analysis.evidence_weight import STRENGTH, evidence_weight
from belieflens.episodes.capabilities import Temperable
from belieflens.model.load import ADAPTER_INFO, load_transformers
from belieflens.run.extract import QueryRecord, records
from belieflens.train.teach import (
    SHIPPED,
    Stack,
    additive_mask,
    environment,
    parse_layers,
    with_lora,
)
from belieflens.train.teach_data import Tree, groups, trees
from belieflens.train.tempered import STRENGTHS

Family = dict[str, xr.DataArray]


def option_logprobs(stack: Stack, tree_list: Sequence[Tree], trunks: Sequence[Any]
                    ) -> list[np.ndarray]:
    """Every read-out's option log-probs (single-token options), in record order."""
    out: list[np.ndarray] = []
    with torch.no_grad():
        for t, h in zip(tree_list, trunks, strict=True):
            pos = torch.from_numpy(t.positions)[None]
            lp = stack.top(h, pos, additive_mask(t.mask()), torch.from_numpy(t.reads))
            for q in range(t.readouts):
                k = int(t.n_options[q])
                out.append(lp[t.option_read[q, :k, 0], t.option_token[q, :k, 0]].numpy())
    return out


def beliefs(recs: Sequence[QueryRecord], lps: Sequence[np.ndarray]
            ) -> dict[tuple[str, str, int, int], np.ndarray]:
    """Geometric debiasing: per (delivery, probe, episode, turn), the mean over rotations of
    each outcome's log-prob, renormalised."""
    acc: dict[tuple[str, str, int, int], list[np.ndarray]] = {}
    for r, lp in zip(recs, lps, strict=True):
        by_outcome = np.empty(len(lp))
        by_outcome[list(r.query.outcome)] = lp
        acc.setdefault((r.delivery, r.probe, r.episode, r.turn), []).append(by_outcome)
    out = {}
    for key, rows in acc.items():
        m = np.mean(rows, axis=0)
        p = np.exp(m - m.max())
        out[key] = p / p.sum()
    return out


def next_flip_family(env: Temperable, episodes: int, turns: int, seed: int = 0) -> Family:
    """Per delivery, the tempered posteriors' P(heads next) ``(strength, episode, turn)`` on
    the held-out episodes (``seed``, turns ``0..turns-1``), for :func:`evidence_weight`."""
    out: dict[str, np.ndarray] = {}
    for i, s in enumerate(STRENGTHS):
        for r in records(env.tempered(s), episodes, seed):
            if r.probe == "next-flip" and r.oracle is not None:
                grid = out.setdefault(r.delivery,
                                      np.full((len(STRENGTHS), episodes, turns), np.nan))
                grid[i, r.episode, r.turn] = r.oracle[0]
    return {d: xr.DataArray(g, dims=(STRENGTH, "episode", "turn"),
                            coords={STRENGTH: list(STRENGTHS)}) for d, g in out.items()}


def readout_loss(recs: Sequence[QueryRecord], lps: Sequence[np.ndarray],
                 target: dict[tuple[str, str, int, int], np.ndarray]) -> float:
    """Teaching's loss on the read-outs ``recs``: the mean over read-outs of KL(target ‖ the
    model's distribution over the rotation's options), in nats."""
    kls = []
    for r, lp in zip(recs, lps, strict=True):
        t = target[(r.delivery, r.probe, r.episode, r.turn)][list(r.query.outcome)]
        logq = lp - np.logaddexp.reduce(lp)
        pos = t > 0
        kls.append(float(np.sum(t[pos] * (np.log(t[pos]) - logq[pos]))))
    return float(np.mean(kls))


def training_loss(info: dict[str, Any], start: int, stop: int) -> float:
    """The mean training loss of the logged windows (``teach.json``'s ``loss_curve``, one per
    ``loss_every`` steps) that end in steps ``start + 1 .. stop``."""
    t = info["training"]
    every = int(t["loss_every"])
    curve = [v for i, v in enumerate(t["loss_curve"]) if start < (i + 1) * every <= stop]
    return float(np.mean(curve)) if curve else float("nan")


def summary(recs: Sequence[QueryRecord], lps: Sequence[np.ndarray],
            target: dict[tuple[str, str, int, int], np.ndarray], family: Family) -> str:
    """One line per delivery: next-flip slope ± SE and evidence weight [95%], next-flip and
    bias TVD (oracle, target)."""
    b = beliefs(recs, lps)
    oracle = {(r.delivery, r.probe, r.episode, r.turn): np.asarray(r.oracle) for r in recs}
    n_ep = 1 + max(r.episode for r in recs)
    n_turn = 1 + max(r.turn for r in recs)
    parts = []
    for d in sorted({r.delivery for r in recs}):
        est = np.full((n_ep, n_turn), np.nan)
        orc = np.full((n_ep, n_turn), np.nan)
        tv: dict[str, list[float]] = {}
        for (dd, p, e, t), v in b.items():
            if dd != d:
                continue
            tv.setdefault(p, []).append(0.5 * float(np.abs(v - oracle[(dd, p, e, t)]).sum()))
            tv.setdefault(p + "*", []).append(0.5 * float(np.abs(v - target[(dd, p, e, t)]).sum()))
            if p == "next-flip":
                est[e, t], orc[e, t] = v[0], oracle[(dd, p, e, t)][0]
        slope, se, _ = updating_slope(est, orc)
        w, lo, hi = evidence_weight(xr.DataArray(est, dims=("episode", "turn")), family[d],
                                    rng=np.random.default_rng(0))
        parts.append(f"{d}: slope {slope:.3f} ± {se:.3f}, weight {w:.3f} [{lo:.3f}, {hi:.3f}], "
                     "next-flip TVD "
                     f"{np.mean(tv['next-flip']):.4f} (target "
                     f"{np.mean(tv['next-flip*']):.4f}), bias TVD "
                     f"{np.mean(tv['bias']):.4f} (target {np.mean(tv['bias*']):.4f})")
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the base's line, then each snapshot's."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("name", choices=list(SHIPPED))
    ap.add_argument("--snapshots", type=Path, nargs="+", required=True,
                    help="folders of step-NNNNN.safetensors (each evaluated in turn)")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0,
                    help="the episodes' seed (0: held out; the training seed reads the "
                    "adapter on the episodes it was taught)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", default="",
                    help="the snapshots' adapted blocks when not the shipped configuration's "
                    "(e.g. 20-29); the trunk cache is per lowest block")
    ap.add_argument("--trunk-cache", type=Path, default=None,
                    help="keep the trunks in this file and reuse them (one file per seed, "
                    "episodes and lowest adapted block)")
    ap.add_argument("--run", type=Path, default=None,
                    help="the run's output folder (its teach.json): also print the training "
                    "loss between snapshots, and take the LoRA's rank and blocks from it")
    args = ap.parse_args(argv)
    info = json.loads((args.run / ADAPTER_INFO).read_text()) if args.run else None
    torch.set_num_threads(args.threads)
    config = SHIPPED[args.name]
    if info is not None:  # the snapshots' LoRA shape is the run's, not the shipped one's
        opts = info["options"]
        config = dataclasses.replace(config, rank=int(opts["rank"]), alpha=float(opts["alpha"]),
                                     layers=tuple(int(x) for x in opts["layers"]))
    if args.layers:
        config = dataclasses.replace(config, layers=parse_layers(args.layers))
    model, tok, _, _ = load_transformers(config.model)
    env = environment(dataclasses_replace_temper(config))
    recs = [r for r in records(env, args.episodes, args.seed) if r.oracle is not None]
    order = [i for g in groups(recs) for i in g]
    recs = [recs[i] for i in order]
    assert isinstance(env, Temperable)
    tempered = [r for r in records(env.tempered(config.temper), args.episodes, args.seed)]
    target: dict[tuple[str, str, int, int], np.ndarray] = {
        (r.delivery, r.probe, r.episode, r.turn): np.asarray(r.oracle) for r in tempered}
    family = next_flip_family(env, args.episodes, 1 + max(r.turn for r in recs), args.seed)
    tree_list = trees(tok, recs)
    t0 = time.process_time()
    stack = Stack(with_lora(model, config, config.layers), min(config.layers))
    key = {"seed": args.seed, "episodes": args.episodes, "block": min(config.layers)}
    cached = (torch.load(args.trunk_cache) if args.trunk_cache is not None
              and args.trunk_cache.is_file() else None)
    if isinstance(cached, dict) and cached.get("key") == key:
        trunks = cached["trunks"]
    else:
        if cached is not None:
            ap.error(f"--trunk-cache {args.trunk_cache} holds other episodes or blocks than "
                     f"{key}: give another file")
        trunks = [stack.trunk(torch.from_numpy(t.ids)[None],
                              torch.from_numpy(t.positions)[None], additive_mask(t.mask()))
                  for t in tree_list]
        if args.trunk_cache is not None:
            torch.save({"key": key, "trunks": trunks}, args.trunk_cache)
    print(f"{len(recs)} read-outs of seed {args.seed} in {len(tree_list)} trees; trunk "
          f"{time.process_time() - t0:.0f} s CPU", flush=True)
    lps = option_logprobs(stack, tree_list, trunks)
    print(f"base: loss {readout_loss(recs, lps, target):.4f}; "
          f"{summary(recs, lps, target, family)}", flush=True)
    params = dict(stack.model.named_parameters())
    from safetensors.torch import load_file

    for folder in args.snapshots:
        last = 0
        for snap in sorted(folder.glob("step-*.safetensors")):
            with torch.no_grad():
                for k, v in load_file(str(snap)).items():
                    params[k].copy_(v)
            lps = option_logprobs(stack, tree_list, trunks)
            step = int(snap.stem.removeprefix("step-"))
            loss = f"loss {readout_loss(recs, lps, target):.4f}"
            if info is not None:
                loss = (f"training loss {training_loss(info, last, step):.4f} (steps "
                        f"{last + 1}-{step}), {loss}")
            last = step
            print(f"{folder.name} {snap.stem}: {loss}; {summary(recs, lps, target, family)}",
                  flush=True)


def dataclasses_replace_temper(config: Any) -> Any:
    """``config`` with the exact oracle as its environment's (held-out truth)."""
    return dataclasses.replace(config, temper=1.0)


if __name__ == "__main__":
    main()
