"""The learning curve of a taught adapter on validation episodes: per condition and delivery,
the updating slope, the output TVD to the oracle and to the adapter's target, and the step
fit, for the base model and each snapshot a teach run kept (``python -m bench.teach_ship
--snapshots DIR``) — the numbers a recipe is chosen on, never on gate episodes.

The conditions come from a gate-format file (``--conditions``, default
``gates/coin-flip-validation.toml``: seeds below 1,000, apart from every gate seed and every
training seed); read-outs whose prompt the run was taught on are left out, as the gates do.
Each condition's read-outs are rendered as teaching's read-out trees
(:mod:`belieflens.train.teach_data`: the read-outs ``extract`` renders, every rotation and
delivery); the frozen blocks below the adapted ones run once for all models (the trunk),
then each snapshot's adapted blocks give every read-out's option log-probabilities, within
1e-4 of what ``extract`` stores (``tests/train/test_teach_data.py``). Beliefs are debiased
geometrically over the rotations, as ``analyze`` does, and measured by
:func:`belieflens.analysis.updating.updating`. With ``--run DIR`` (the run's output folder)
the base model and the LoRA's rank and blocks are the run's, and each line also gives the
training loss logged between one snapshot and the next.

Run: ``.venv/bin/python -m bench.teach_curve smollm2-135m-bayes --snapshots DIR [DIR ...]
[--run DIR] [--conditions FILE] [--threads 1] [--every 1] [--by-turn] [--shortcuts]
[--results NAME]``.
Last line: the last snapshot's line.
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

from belieflens.analysis.updating import updating
from belieflens.dims import DELIVERY, EPISODE, OUTCOME, PROBE, TURN
from belieflens.envs import get as get_env
from belieflens.episodes.capabilities import Temperable
from belieflens.model.load import ADAPTER_INFO, load_transformers
from belieflens.readouts.render import bos_policy, prompt_key, render
from belieflens.run.extract import QueryRecord, records
from belieflens.train.gates import GateFile, load_gate_file
from belieflens.train.teach import (
    SHIPPED,
    Stack,
    TeachConfig,
    additive_mask,
    taught_trees,
    trained_prompts,
    with_lora,
)
from belieflens.train.teach_data import Tree, build_tree, groups
from bench._lib import add_results_option, start_results

DEFAULT_CONDITIONS = Path(__file__).resolve().parents[1] / "gates" / "coin-flip-validation.toml"


def option_logprobs(stack: Stack, tree_list: Sequence[Tree], trunks: Sequence[Any]
                    ) -> list[np.ndarray]:
    """Every read-out's option log-probs (single-token options), in tree order."""
    out: list[np.ndarray] = []
    with torch.no_grad():
        for t, h in zip(tree_list, trunks, strict=True):
            pos = torch.from_numpy(t.positions)[None]
            lp = stack.top(h, pos, additive_mask(t.mask()), torch.from_numpy(t.reads))
            for q in range(t.readouts):
                k = int(t.n_options[q])
                out.append(lp[t.option_read[q, :k, 0], t.option_token[q, :k, 0]].numpy())
    return out


@dataclasses.dataclass
class Part:
    """One parameter set of a condition: its read-outs (tree order), trees, trunks, targets."""

    recs: list[QueryRecord]
    trees: list[Tree]
    taught: np.ndarray
    """Per read-out: whether its prompt was taught."""
    target: dict[tuple[str, str, int, int], np.ndarray]
    env: Any = None
    """The environment the read-outs are of."""
    seed: int = 0
    episodes: int = 0
    trunks: list[Any] = dataclasses.field(default_factory=list)


def part(tok: Any, gates: GateFile, params: dict[str, Any], seed: int, episodes: int,
         temper: float, keys: frozenset[str]) -> Part:
    """The read-outs of ``episodes`` episodes of ``params`` at ``seed`` as trees."""
    env = get_env(gates.env, **params)
    recs = [r for r in records(env, episodes, seed) if r.oracle is not None]
    recs = [recs[i] for g in groups(recs) for i in g]
    bos = bos_policy(tok)
    tqs = [render(tok, r.query, bos=bos) for r in recs]
    tree_list = [build_tree([recs[i] for i in g], [tqs[i] for i in g]) for g in groups(recs)]
    taught = np.array([prompt_key(tq.context_text) for tq in tqs], dtype=object)
    assert isinstance(env, Temperable)
    target = {(str(r.delivery), r.probe, r.episode, r.turn): np.asarray(r.oracle)
              for r in records(env.tempered(temper), episodes, seed)}
    return Part(recs, tree_list, np.isin(taught, list(keys)), target, env, seed, episodes)


def beliefs(parts: Sequence[Part], lps: Sequence[Sequence[np.ndarray]], probe: str
            ) -> tuple[xr.Dataset, xr.DataArray]:
    """Geometrically debiased beliefs ``(delivery, probe, episode, turn, outcome)`` of every
    part (episodes numbered on), taught cells NaN, with the target on the same grid."""
    acc: dict[tuple[str, int, int], list[np.ndarray]] = {}
    oracle, target, dropped = {}, {}, set()
    offset = 0
    for p, lp in zip(parts, lps, strict=True):
        for r, x, taught in zip(p.recs, lp, p.taught, strict=True):
            if r.probe != probe:
                continue
            key = (str(r.delivery), r.episode + offset, r.turn)
            by_outcome = np.empty(len(x))
            by_outcome[list(r.query.outcome)] = x
            acc.setdefault(key, []).append(by_outcome)
            oracle[key] = np.asarray(r.oracle)
            target[key] = p.target[(r.delivery, r.probe, r.episode, r.turn)]
            if taught:
                dropped.add(key)
        offset += 1 + max(r.episode for r in p.recs)
    deliveries = sorted({k[0] for k in acc})
    shape = (len(deliveries), 1, offset, 1 + max(k[2] for k in acc), 2)
    grids = {n: np.full(shape, np.nan) for n in ("belief", "oracle", "target")}
    for key, rows in acc.items():
        if key in dropped:
            continue
        m = np.mean(rows, axis=0)
        at = (deliveries.index(key[0]), 0, key[1], key[2])
        grids["belief"][at] = np.exp(m - np.logaddexp.reduce(m))
        grids["oracle"][at], grids["target"][at] = oracle[key], target[key]
    dims = (DELIVERY, PROBE, EPISODE, TURN, OUTCOME)
    coords = {DELIVERY: deliveries, PROBE: [probe]}
    ds = xr.Dataset({n: (dims, grids[n]) for n in ("belief", "oracle")}, coords=coords)
    ds["outcome_label"] = ((PROBE, OUTCOME), [["first", "second"]])
    return ds, xr.DataArray(grids["target"], dims=dims, coords=coords)


COLUMNS = ("model", "condition", "delivery", "slope ± SE", "TVD to oracle", "TVD to target",
           "step R²")


Read = dict[str, tuple[xr.Dataset, xr.DataArray]]
"""Per condition, a model's beliefs (with the oracle) and its target on the same grid."""


def read_beliefs(gates: GateFile, conditions: dict[str, list[Part]],
                 lps: dict[str, list[list[np.ndarray]]]) -> Read:
    """Every condition's :func:`beliefs` from one model's option log-probs."""
    return {c: beliefs(parts, lps[c], gates.probe) for c, parts in conditions.items()}


def rows(name: str, gates: GateFile, read: Read) -> list[list[str]]:
    """One model's measures per condition and delivery (:data:`COLUMNS`)."""
    out = []
    for cond, (b, t) in read.items():
        m = updating(b, t).sel({PROBE: gates.probe})
        for d in m[DELIVERY].values:
            v = m.sel({DELIVERY: d})
            out.append([name, cond, str(d),
                        f"{float(v['slope']):.3f} ± {float(v['slope_se']):.3f}",
                        f"{float(v['tvd_oracle']):.4f}", f"{float(v['tvd_target']):.4f}",
                        f"{float(v['step_r2']):.3f}"])
    return out


def shortcut_read(conditions: dict[str, list[Part]], like: Read, shortcut: Any,
                  strength: float) -> Read:
    """What ``shortcut`` (:mod:`belieflens.envs.coin_flip.shortcuts`) answers on the cells
    ``like`` (a model's read) holds, in both deliveries alike."""
    from belieflens.envs.coin_flip.env import draw_episode

    out: Read = {}
    for cond, parts in conditions.items():
        b, t = like[cond]
        p_first = np.full((b.sizes[EPISODE], b.sizes[TURN]), np.nan)
        row = 0
        for p in parts:
            for i in range(p.episodes):
                x = shortcut(p.env, draw_episode(p.env.params, p.seed, i), strength)
                p_first[row, : len(x)] = x
                row += 1
        grid = np.stack([p_first, 1 - p_first], axis=-1)[None, None]
        found = b["belief"].copy(data=np.broadcast_to(grid, b["belief"].shape).copy())
        out[cond] = (b.assign(belief=found.where(b["belief"].notnull())), t)
    return out


TURN_BINS = ((0, 0, "before any flip"), (1, 3, "after 1-3 flips"), (4, 10**6, "after 4 or more"))
"""The turns of the ``--by-turn`` table's columns: where on an episode a model misses."""


def baselines(conditions: dict[str, list[Part]], base: Read, temper: float, shortcuts: bool
              ) -> list[tuple[str, Read]]:
    """The base model's read, then (``shortcuts``) each coin-flip shortcut's on its cells."""
    named = [("base", base)]
    if shortcuts:
        from belieflens.envs.coin_flip.env import CoinFlip
        from belieflens.envs.coin_flip.shortcuts import SHORTCUTS

        env = next(p.env for ps in conditions.values() for p in ps)
        if not isinstance(env, CoinFlip):
            raise SystemExit(f"error: --shortcuts: the shortcuts are the coin flip's, not "
                             f"{env.name}'s")
        named += [(f"shortcut: {k}", shortcut_read(conditions, base, f, temper))
                  for k, f in SHORTCUTS.items()]
    return named


def tvd_by_turn(b: xr.Dataset, probe: str) -> dict[str, list[float]]:
    """Per delivery, the mean TVD of ``b``'s belief to its oracle over each of
    :data:`TURN_BINS`' turns (NaN where a bin has no cell)."""
    tv = 0.5 * abs(b["belief"] - b["oracle"]).sum(OUTCOME, skipna=False)
    tv = tv.sel({PROBE: probe})
    return {str(d): [float(tv.sel({DELIVERY: d}).isel({TURN: slice(lo, hi + 1)}).mean())
                     for lo, hi, _ in TURN_BINS] for d in tv[DELIVERY].values}


def turn_rows(name: str, gates: GateFile, read: Read) -> list[list[str]]:
    """One model's :func:`tvd_by_turn` per condition and delivery."""
    return [[name, cond, d, *(f"{x:.4f}" for x in tvds)]
            for cond, (b, _) in read.items()
            for d, tvds in tvd_by_turn(b, gates.probe).items()]


def line(found: list[list[str]]) -> str:
    """One model's rows on one line."""
    return f"{found[0][0]}: " + "; ".join(
        f"{r[1]}/{r[2]}: slope {r[3]}, TVD {r[4]} (target {r[5]}), step R2 {r[6]}"
        for r in found)


def training_loss(info: dict[str, Any], start: int, stop: int) -> float:
    """The mean training loss of the logged windows (``teach.json``'s ``loss_curve``, one per
    ``loss_every`` steps) that end in steps ``start + 1 .. stop``."""
    t = info["training"]
    every = int(t["loss_every"])
    curve = [v for i, v in enumerate(t["loss_curve"]) if start < (i + 1) * every <= stop]
    return float(np.mean(curve)) if curve else float("nan")


def run_config(name: str, run: Path | None) -> tuple[TeachConfig, dict[str, Any] | None]:
    """The shipped recipe ``name``, with the base model and LoRA shape of the run in ``run``
    if given (the read-outs left out are then the run's own, from its ``prompts.txt``)."""
    config = SHIPPED[name]
    if run is None:
        return config, None
    info: dict[str, Any] = json.loads((run / ADAPTER_INFO).read_text())
    opts = info["options"]
    return dataclasses.replace(config, model=str(opts.get("model", config.model)),
                               rank=int(opts["rank"]), alpha=float(opts["alpha"]),
                               layers=tuple(int(x) for x in opts["layers"])), info


def run_keys(config: TeachConfig, run: Path | None, tok: Any) -> frozenset[str]:
    """The prompt keys a run was taught: its own record where given (an experiment's mix is
    not the shipped one), else the shipped recipe's read-outs rebuilt."""
    return (trained_prompts(run, tok) if run is not None
            else frozenset(taught_trees(config, tok)[1]))


def load_snapshot(params: dict[str, Any], snapshot: Path) -> None:
    """Copy a snapshot's adapter weights into a LoRA model's ``named_parameters()``."""
    from safetensors.torch import load_file

    with torch.no_grad():
        for k, v in load_file(str(snapshot)).items():
            params[k].copy_(v)


def snapshot_parser(doc: str | None, snapshots: str) -> argparse.ArgumentParser:
    """A parser of what every reading of a teach run's snapshots takes: the shipped recipe's
    name, ``--snapshots`` (``snapshots``: what they are), ``--run``, ``--threads`` and
    ``--results``."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("name", choices=list(SHIPPED))
    ap.add_argument("--snapshots", type=Path, nargs="+", required=True, help=snapshots)
    ap.add_argument("--run", type=Path, default=None,
                    help="the run's output folder (its teach.json and prompts.txt): its base "
                    "model, LoRA's rank and blocks, taught prompts and training loss")
    ap.add_argument("--threads", type=int, default=1)
    add_results_option(ap)
    return ap


def main(argv: Sequence[str] | None = None) -> None:
    """Print the base's line, then each snapshot's."""
    ap = snapshot_parser(__doc__, "folders of step-NNNNN.safetensors (each evaluated in turn)")
    ap.add_argument("--conditions", type=Path, default=DEFAULT_CONDITIONS,
                    help="a gate-format file whose conditions and seed are read")
    ap.add_argument("--every", type=int, default=1, help="read every N-th snapshot")
    ap.add_argument("--shortcuts", action="store_true",
                    help="also the coin flip's shortcut updaters (belieflens.envs.coin_flip."
                    "shortcuts) on the base's read-outs: what a model that did not learn the "
                    "update would score")
    ap.add_argument("--by-turn", action="store_true",
                    help="also the TVD to the oracle by turn (results NAME-by-turn): before "
                    "any flip (the stated prior read alone), after 1-3 flips, after 4 or more")
    args = ap.parse_args(argv)
    recorder = start_results(args)
    torch.set_num_threads(args.threads)
    config, info = run_config(args.name, args.run)
    gates = load_gate_file(args.conditions)
    model, tok, _, _ = load_transformers(config.model)
    keys = run_keys(config, args.run, tok)
    t0 = time.process_time()
    conditions = {c: [part(tok, gates, *x, config.temper, keys) for x in gates.episodes_of(c)]
                  for c in gates.conditions}
    stack = Stack(with_lora(model, config, config.layers), min(config.layers))
    for parts in conditions.values():
        for p in parts:
            p.trunks = [stack.trunk(torch.from_numpy(t.ids)[None],
                                    torch.from_numpy(t.positions)[None],
                                    additive_mask(t.mask())) for t in p.trees]
    n = sum(len(p.recs) for ps in conditions.values() for p in ps)
    dropped = sum(int(p.taught.sum()) for ps in conditions.values() for p in ps)
    print(f"{n} read-outs ({dropped} taught, left out) of {gates.path.name}; trunk "
          f"{time.process_time() - t0:.0f} s CPU", flush=True)

    def read() -> dict[str, list[list[np.ndarray]]]:
        return {c: [option_logprobs(stack, p.trees, p.trunks) for p in ps]
                for c, ps in conditions.items()}

    table: list[list[str]] = []
    by_turn: list[list[str]] = []
    for name, found_read in baselines(conditions, read_beliefs(gates, conditions, read()),
                                      config.temper, args.shortcuts):
        found = rows(name, gates, found_read)
        print(line(found), flush=True)
        table += found
        if args.by_turn:
            by_turn += turn_rows(name, gates, found_read)
    params = dict(stack.model.named_parameters())
    for folder in args.snapshots:
        last = 0
        for snap in sorted(folder.glob("step-*.safetensors"))[args.every - 1:: args.every]:
            load_snapshot(params, snap)
            step = int(snap.stem.removeprefix("step-"))
            head = f"{folder.name} {snap.stem}"
            if info is not None:
                head += f" (training loss {training_loss(info, last, step):.4f})"
            last = step
            snap_read = read_beliefs(gates, conditions, read())
            found = rows(head, gates, snap_read)
            print(line(found), flush=True)
            table += found
            if args.by_turn:
                by_turn += turn_rows(head, gates, snap_read)
                print("; ".join(f"{r[1]}/{r[2]}: " + " / ".join(r[3:])
                                for r in by_turn[-len(found):]), flush=True)
    if recorder is not None:
        note = (f"base model {config.model}; validation conditions of {gates.path.name} (seed "
                f"{gates.seed}), {n} read-outs, {dropped} taught and left out")
        recorder.write(args.results, COLUMNS, table, note=note)
        if args.by_turn:
            recorder.write(f"{args.results}-by-turn",
                           ("model", "condition", "delivery",
                            *(f"TVD to oracle {b[2]}" for b in TURN_BINS)), by_turn, note=note)


if __name__ == "__main__":
    main()
