"""The calibration through the text pipeline: the base model and the taught adapters on
held-out coin-flip episodes, and the teaching gates.

Extracts ``coin-flip --set turns=10`` (both deliveries, both questions, every rotation) for
``smollm2-135m``, ``smollm2-135m-bayes`` and ``smollm2-135m-bayes-0.3`` on episodes of seed 0
(the adapters were taught on seed 1,000,000,000), then prints per model, delivery and
question: the updating slope against the oracle (± SE clustered by episode, and its 95%
interval), the output TVD of the debiased belief to the oracle and to the model's own target
(the tempered posterior), and the mean TVD of each rotation's own belief to the target (a
rotation or template bug shows there), the evidence weight, and the spread: the slope of the
model's point estimate on its target's (levels; above 1 when the beliefs sit further from
their middle than the target's). Then the gates. ``--out-of-range`` also extracts the
S = 1 adapter and the base on 20 flips (twice the trained length) and on a Beta(4, 1) prior,
reported, not gated. ``--compare`` adds ``belieflens compare`` of the held-out studies (per
layer: the logit lens and the decoders of each model, the taught beside the base). Files
already in ``--out`` are reused.

Run: ``.venv/bin/python -m bench.teach_gates --out runs/calibration [--episodes 6]
[--out-of-range] [--compare]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import belieflens
from belieflens import api
from belieflens.analysis.beliefs import output_beliefs, point_estimates
from belieflens.analysis.compare import updating_slope
from belieflens.envs import get
from belieflens.episodes.capabilities import Temperable
from belieflens.run.extract import records
from belieflens.train.tempered import study_evidence_weight

BASE = "smollm2-135m"
TAUGHT = {"smollm2-135m-bayes": 1.0, "smollm2-135m-bayes-0.3": 0.3}
"""The shipped adapters and the evidence weight each was taught."""


def study(model: str, out: Path, params: Mapping[str, object], episodes: int) -> Path:
    """The held-out study of ``model`` (extracted once, reused after)."""
    tag = "-".join(f"{k}{v}" for k, v in sorted(params.items()))
    path = out / f"{model}-{tag}-e{episodes}.h5"
    if not path.exists():
        belieflens.extract("coin-flip", out=path, params=dict(params), model=model,
                           episodes=episodes, seed=0, threads=1)
    return path


def with_target(ds: xr.Dataset, params: Mapping[str, object], strength: float,
                episodes: int) -> xr.Dataset:
    """``ds`` with its ``oracle`` replaced by the tempered posterior (same read-out order)."""
    env = get("coin-flip", **dict(params))
    assert isinstance(env, Temperable)
    env = env.tempered(strength)
    target = np.full(ds["oracle"].shape, np.nan)
    for i, rec in enumerate(records(env, episodes, 0)):
        assert rec.oracle is not None
        target[i, : len(rec.oracle)] = rec.oracle
    return ds.assign(oracle=(ds["oracle"].dims, target))


def rotation_tvd(ds: xr.Dataset) -> dict[tuple[str, str], float]:
    """Mean TVD of each read-out's own (one rotation's) belief to ``ds``'s oracle."""
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)
    outcome = np.asarray(ds["outcome"].values)
    oracle = np.asarray(ds["oracle"].values, dtype=np.float64)
    k = np.asarray(ds["n_outcome"].values)
    out: dict[tuple[str, str], list[float]] = {}
    for i in range(lp.shape[0]):
        p = np.exp(lp[i, : k[i]] - lp[i, : k[i]].max())
        belief = np.zeros(k[i])
        belief[outcome[i, : k[i]]] = p / p.sum()
        key = (str(ds["delivery"].values[i]), str(ds["probe"].values[i]))
        out.setdefault(key, []).append(0.5 * float(np.abs(belief - oracle[i, : k[i]]).sum()))
    return {key: float(np.mean(v)) for key, v in out.items()}


def measures(path: Path, params: Mapping[str, object], strength: float,
             episodes: int) -> dict[tuple[str, str], dict[str, float]]:
    """Per (delivery, probe): slope, its SE, TVD to the oracle, to the target, per rotation."""
    ds = belieflens.open_cache(path)
    beliefs = output_beliefs(ds)
    target = output_beliefs(with_target(ds, params, strength, episodes))
    est = point_estimates(beliefs)
    tvd = 0.5 * abs(beliefs["belief"] - beliefs["oracle"]).sum("outcome")
    tvd_t = 0.5 * abs(target["belief"] - target["oracle"]).sum("outcome")
    target_est = point_estimates(target)
    rot = rotation_tvd(with_target(ds, params, strength, episodes))
    env = get("coin-flip", **dict(params))
    assert isinstance(env, Temperable)
    weight = study_evidence_weight(env, beliefs, episodes=episodes, seed=0,
                                   rng=np.random.default_rng(0))
    out: dict[tuple[str, str], dict[str, float]] = {}
    for d in beliefs["delivery"].values:
        for p in beliefs["probe"].values:
            sel: dict[str, Any] = {"delivery": d, "probe": p}
            slope, se, _ = updating_slope(est["estimate"].sel(sel), est["oracle_estimate"].sel(sel))
            own, _, _ = updating_slope(target_est["oracle_estimate"].sel(sel),
                                       est["oracle_estimate"].sel(sel))
            out[(str(d), str(p))] = {
                "slope": slope, "se": se, "target_slope": own,
                "tvd": float(tvd.sel(sel).mean()), "tvd_target": float(tvd_t.sel(sel).mean()),
                "rotation_tvd": rot[(str(d), str(p))],
                "spread": spread(est["estimate"].sel(sel), target_est["oracle_estimate"].sel(sel)),
                **{k: float(weight[k].sel(sel)) for k in (
                    "evidence_weight", "evidence_weight_lo", "evidence_weight_hi")},
                **after_first(est["estimate"].sel(sel), est["oracle_estimate"].sel(sel))}
    ds.close()
    return out


def spread(est: xr.DataArray, target: xr.DataArray) -> float:
    """The least-squares slope of the model's point estimate on its target's over every
    episode and turn (levels, not changes): 1 when the model's beliefs spread as far as the
    target's, above 1 when they sit further from their middle."""
    x = np.asarray(target.values, dtype=np.float64).ravel()
    y = np.asarray(est.transpose(*target.dims).values, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    xc = x[ok] - x[ok].mean()
    return float(xc @ (y[ok] - y[ok].mean()) / (xc @ xc))


def after_first(est: xr.DataArray, orc: xr.DataArray) -> dict[str, float]:
    """How far the estimate moves after the first flip: per episode the largest
    |estimate at turn t - estimate at turn 1| over t >= 2, the range over episodes, for the
    model (``moves_lo``/``_hi``) and the oracle (``oracle_moves_lo``/``_hi``). A model that
    only follows the first flip moves far less than the oracle."""
    out = {}
    for name, x in (("moves", est), ("oracle_moves", orc)):
        v = np.asarray(x.transpose("episode", "turn").values, dtype=np.float64)
        m = np.nanmax(np.abs(v[:, 2:] - v[:, [1]]), axis=1)
        out[f"{name}_lo"], out[f"{name}_hi"] = float(np.min(m)), float(np.max(m))
    return out


def table(name: str, m: Mapping[tuple[str, str], Mapping[str, float]]) -> None:
    """Print one model's measures."""
    print(f"\n{name}")
    print(f"  {'delivery / probe':<24} {'slope ± SE':>15} {'95% interval':>16} "
          f"{'target slope':>12} {'TVD oracle':>10} {'TVD target':>10} {'rot. TVD':>9} "
          f"{'evidence weight [95%]':>22} {'spread':>6}  after flip 1: model / oracle moves")
    for (d, p), v in sorted(m.items()):
        lo, hi = v["slope"] - 1.96 * v["se"], v["slope"] + 1.96 * v["se"]
        print(f"  {d + ' / ' + p:<24} {v['slope']:>7.3f} ± {v['se']:.3f} "
              f"[{lo:6.3f}, {hi:6.3f}] {v['target_slope']:>12.3f} {v['tvd']:>10.4f} "
              f"{v['tvd_target']:>10.4f} {v['rotation_tvd']:>9.4f} "
              f"{v['evidence_weight']:>6.3f} [{v['evidence_weight_lo']:.3f}, "
              f"{v['evidence_weight_hi']:.3f}] {v['spread']:>6.3f}  "
              f"{v['moves_lo']:.2f}-{v['moves_hi']:.2f} / "
              f"{v['oracle_moves_lo']:.2f}-{v['oracle_moves_hi']:.2f}")


def gates(ms: Mapping[str, Mapping[tuple[str, str], Mapping[str, float]]]) -> list[str]:
    """The teaching gates on next-flip, each delivery: lines of ``met``/``NOT met``."""
    lines = []
    one, third = ms["smollm2-135m-bayes"], ms["smollm2-135m-bayes-0.3"]
    for d in ("single-turn", "multi-turn"):
        a, b = one[(d, "next-flip")], third[(d, "next-flip")]
        checks = [
            (f"S=1 {d}: slope {a['slope']:.3f} >= 0.8", a["slope"] >= 0.8),
            (f"S=1 {d}: output TVD to the oracle {a['tvd']:.4f} <= 0.05", a["tvd"] <= 0.05),
            (f"S=0.3 {d}: slope {b['slope']:.3f} within 0.3 ± 0.1 (its target's own slope: "
             f"{b['target_slope']:.3f})", abs(b["slope"] - 0.3) <= 0.1),
            (f"S=0.3 {d}: slope within its target's {b['target_slope']:.3f} ± 0.1",
             abs(b["slope"] - b["target_slope"]) <= 0.1),
            (f"S=0.3 {d}: evidence weight {b['evidence_weight']:.3f} within 0.3 ± 0.1 (the "
             "tempered family's own S)", abs(b["evidence_weight"] - 0.3) <= 0.1),
            (f"S=1 {d}: evidence weight {a['evidence_weight']:.3f} [{a['evidence_weight_lo']:.3f}"
             f", {a['evidence_weight_hi']:.3f}] >= 0.8", a["evidence_weight"] >= 0.8),
            (f"{d}: 95% slope intervals apart ([{b['slope'] - 1.96 * b['se']:.3f}, "
             f"{b['slope'] + 1.96 * b['se']:.3f}] vs [{a['slope'] - 1.96 * a['se']:.3f}, "
             f"{a['slope'] + 1.96 * a['se']:.3f}])",
             b["slope"] + 1.96 * b["se"] < a["slope"] - 1.96 * a["se"]),
        ]
        lines += [f"{'met' if ok else 'NOT met'}: {text}" for text, ok in checks]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Extract, measure, print the tables and the gates."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/calibration"))
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--out-of-range", action="store_true")
    ap.add_argument("--compare", action="store_true",
                    help="also `belieflens compare` the held-out studies into OUT/compare: "
                    "per layer, the logit lens and the decoders of each model")
    ap.add_argument("--models", nargs="*", default=[BASE, *TAUGHT])
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    params: dict[str, object] = {"turns": 10}
    ms = {}
    for model in args.models:
        path = study(model, args.out, params, args.episodes)
        ms[model] = measures(path, params, TAUGHT.get(model, 1.0), args.episodes)
        table(f"{model} (target: evidence weight {TAUGHT.get(model, 1.0)}), {path}", ms[model])
    if all(m in ms for m in TAUGHT):
        print("\ngates (next-flip, held-out episodes of seed 0):")
        print("\n".join("  " + line for line in gates(ms)))
    if args.compare:
        files = [study(m, args.out, params, args.episodes) for m in args.models]
        print(api.compare_report(files, args.out / "compare").text)
    if args.out_of_range:
        for extra in ({"turns": 20}, {"turns": 10, "a0": 4.0, "b0": 1.0}):
            for model in (BASE, "smollm2-135m-bayes"):
                path = study(model, args.out, extra, 2)
                table(f"out of range {extra}: {model}", measures(path, extra, 1.0, 2))


if __name__ == "__main__":
    main()
