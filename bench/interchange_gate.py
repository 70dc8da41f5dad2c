"""The interchange gate on ``rrxor-toy``: the learned subspace's follow is at least 0.5 above
the random-subspace floor and the untrained floor at the best layer, on held-out pairs.

The configuration is frozen in ``bench/interchange_gate.json`` (committed before its study was
first extracted): the study (``rrxor`` by ``rrxor-toy``, its seed and episodes), the selected
turns, the recipe (rank, steps, learning rate, pairs per step), the held-out share, the random
controls, the untrained networks and the threshold. The script extracts the study, runs
``belieflens.interchange`` on it (the untrained networks rebuilt from the toy by ``--init``),
and reads the result with :func:`belieflens.analysis.follow.interchange_follow`: the layer
with the largest gap on the validation pairs is read on the test pairs, which no training
step and no choice saw.

It prints, per layer, the test follow of the learned subspace, the random subspaces and the
untrained networks (95% intervals: bootstrap over base episodes; the untrained floor also
over the networks), the gaps, the count-preserving order swaps, and a last line with the gate.

Run: ``.venv/bin/python -m bench.interchange_gate [--config bench/interchange_gate.json]
[--out DIR] [--json FILE]`` (``make gate-interchange``; five CPU-minutes on one thread).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import xarray as xr

import belieflens
from belieflens.analysis.follow import TRAINED, best_layer, interchange_follow
from belieflens.interventions.readouts import Selection

CONFIG = Path(__file__).with_name("interchange_gate.json")
"""The frozen configuration."""


def options(cfg: dict[str, Any]) -> belieflens.InterchangeOptions:
    """The interchange options the configuration names."""
    layers = cfg["layers"]
    return belieflens.InterchangeOptions(
        layers=None if layers is None else tuple(layers), rank=cfg["rank"], steps=cfg["steps"],
        lr=cfg["lr"], batch_pairs=cfg["batch_pairs"], heldout=cfg["heldout"],
        controls=cfg["controls"], pairings=tuple(cfg["pairings"]),
        untrained=tuple(cfg["untrained"]), seed=cfg["seed"])


def ci(s: xr.Dataset, name: str) -> str:
    """``value [low, high]`` of ``name`` in ``s``."""
    return (f"{float(s[name]):+.3f} [{float(s[name + '_low']):+.3f}, "
            f"{float(s[name + '_high']):+.3f}]")


def table(summ: xr.Dataset, pairing: str) -> list[str]:
    """The test pairs' follow per layer for one pairing."""
    s = summ.sel(split="test", pairing=pairing)
    lines = [f"test pairs, {pairing} pairing: {int(s['n'])} instance pairs "
             f"(the oracle moves in {int(s['n_moving'])}, mean TVD "
             f"{float(s['oracle_moved']):.3f})",
             "layer  learned                  random subspace          untrained (mean)   "
             "gap over random          gap over untrained"]
    for la in summ["layer"].values:
        t = s.sel(model=TRAINED, layer=la)
        g = s.sel(layer=la)
        lines.append(f"{int(la):>5}  {ci(t, 'follow'):<24} {ci(t, 'control_follow'):<24} "
                     f"{float(g['untrained_floor']):+.3f}             "
                     f"{ci(g, 'gap_random'):<24} {ci(g, 'gap_untrained')}")
    return lines


def verdict(summ: xr.Dataset, threshold: float) -> tuple[bool, dict[str, Any], str]:
    """Whether the gate passes, its numbers, and the last line."""
    layer = best_layer(summ)
    if layer is None:
        return False, {}, "interchange gate FAIL: no validation gap to choose a layer on"
    s = summ.sel(split="test", pairing="any", layer=layer)
    t = s.sel(model=TRAINED)
    nums = {"best_layer": layer, **{k: float(t[k]) for k in (
        "follow", "follow_low", "follow_high", "control_follow", "source_follow")},
        **{k: float(s[k]) for k in ("untrained_floor", "gap_random", "gap_random_low",
                                    "gap_random_high", "gap_untrained", "gap_untrained_low",
                                    "gap_untrained_high")}}
    ok = nums["gap_random_low"] >= threshold and nums["gap_untrained_low"] >= threshold
    line = (f"interchange gate {'PASS' if ok else 'FAIL'}: layer {layer} (best on validation), "
            f"test follow {ci(t, 'follow')}; above the random subspace by "
            f"{ci(s, 'gap_random')}, above the untrained networks by {ci(s, 'gap_untrained')} "
            f"(gate: both lower ends >= {threshold})")
    return ok, nums, line


def main(argv: list[str] | None = None) -> int:
    """Run the gate; 0 if it passes, 1 if not."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--out", type=Path, default=Path("runs/interchange-gate"))
    ap.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = ap.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    study = belieflens.extract(cfg["env"], model=cfg["model"], episodes=cfg["episodes"],
                               seed=cfg["study_seed"], out=args.out / "study.h5",
                               overwrite=True, threads=1)
    result = belieflens.interchange(
        study, out=args.out / "interchange.h5", options=options(cfg), overwrite=True,
        select=Selection(turns=tuple(cfg["turns"])),
        on_progress=lambda d, n: print(f"  interchange: {d}/{n} layers", flush=True))
    with xr.open_dataset(result, engine="h5netcdf") as ds:
        summ = interchange_follow(ds.load())
    for pairing in [str(p) for p in summ["pairing"].values]:
        print("\n".join(table(summ, pairing)))
    ok, nums, line = verdict(summ, float(cfg["threshold"]))
    if args.json is not None:
        args.json.write_text(json.dumps({"config": cfg, "pass": ok, **nums}, indent=1))
    print(f"({time.perf_counter() - t0:.0f} s; result {result})")
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
