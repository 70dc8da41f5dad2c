"""The model-level gates of the toy transformers (``coin-toy``, ``mess3-toy``,
``rrxor-toy``): every gate of docs/toys.md that needs only the model.

For each toy (a shipped name or a folder):

- **cross-entropy per position** against the optimal predictor's. For ``mess3`` and ``rrxor``
  it is exact: every prefix of the enumeration, weighted by its probability, scored against
  the oracle's next-token distribution. For ``coin-tokens`` it is the mean over held-out
  sampled sequences (``--coin-sequences``, default 20,000) next to the exact optimum.
- **belief regression**: an affine ridge regression from the residual stream (belieflens's
  layers: 0 = embeddings, l = block l-1's output, the last before the final LayerNorm) to the
  belief, per layer and on all layers concatenated; held out by whole sequences (half of
  them, drawn at random; ``--held-out`` changes the fraction), the ridge strength chosen by
  5-fold cross-validation over the training sequences. For enumerated processes every
  sequence of length ``L`` is used, weighted by its exact probability (a read-out shared by
  several sequences is one row whose weights are added per split). Read-outs are the turns
  ``1..L`` (at least one token seen). R² is pooled over the belief's coordinates:
  ``1 - SSE / SST`` around the held-out weighted mean.
- **comparisons**: the shuffled-belief control (training beliefs permuted across read-outs),
  the recent-token baselines (affine in one-hots of the last ``k`` tokens, and a lookup
  table of the last ``k`` tokens, k = 1..4), the regression from the model's own
  next-token distribution (and, for context, from the oracle's), and for the coin the
  posterior mean's R² with the affine baseline in the last 8 flips and the position.
- **coin**: the mean TVD of the output's next-flip distribution to the posterior
  predictive and the updating slope (``belieflens.analysis.compare.updating_slope``).

Run: ``.venv/bin/python -m bench.toy_gates [mess3-toy rrxor-toy coin-toy | DIR ...]
[--threads 1] [--json out.json]``. The last line per toy says which gates pass.

``--seeds 0 1 2`` runs each named toy's seeds (seed 0: the shipped toy; seed S: the same
recipe trained from S by ``bench/toy_ship.py --seed S`` into ``--seed-dir``, by default
``belieflens/data/toys/seeds/<name>-seed<S>``) and ends with the spread of every gate's number
across the seeds (min, max, values) and how many seeds pass each gate.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from belieflens.envs.tokens.coin import CoinTokens
from belieflens.train.toy import TOY_NAMES, Toy, load_toy, residuals, with_bos
from bench._lib import add_results_option, start_results

FOLDS = 5
"""Cross-validation folds over training sequences (the ridge strength)."""

LAMBDAS = tuple(10.0**e for e in range(-8, 2))
"""Ridge strengths tried, per unit of training weight, on standardised features."""

SPLIT_SEED = 12345
"""Seed of the train/test split of sequences and of the shuffled control."""

HELD_OUT = 0.5
"""Fraction of sequences held out (``--held-out``)."""

EVAL_SEED = 10**9 + 7
"""Seed of held-out sampled sequences (training batches use ``[seed, 1, step]`` streams)."""


# ------------------------------------------------------------------------------ regression
@dataclass
class Rows:
    """Read-outs: ``seq`` and ``turn`` locate each in the model's input, ``y`` is its target,
    ``w[row, group]`` its weight in each group (groups ``0..FOLDS-1``: training folds;
    ``FOLDS``: held out)."""

    seq: np.ndarray
    turn: np.ndarray
    y: np.ndarray
    w: np.ndarray


def _stats(z: np.ndarray, y: np.ndarray, w: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-group sufficient statistics ``Z' W_g Z``, ``Z' W_g Y``, ``sum W_g |Y|^2``."""
    a = np.stack([(z * w[:, g, None]).T @ z for g in range(w.shape[1])])
    b = np.stack([(z * w[:, g, None]).T @ y for g in range(w.shape[1])])
    c = (w * (y**2).sum(axis=1)[:, None]).sum(axis=0)
    return a, b, c


def _sse(beta: np.ndarray, a: np.ndarray, b: np.ndarray, c: float) -> float:
    return float(c - 2.0 * np.sum(beta * b) + np.sum(beta * (a @ beta)))


def ridge_r2(x: np.ndarray, rows: Rows, *, y_train: np.ndarray | None = None) -> float:
    """Held-out R² of an affine ridge regression ``x -> rows.y`` (see the module doc);
    ``y_train`` replaces the targets the regression is fitted on (the shuffled control)."""
    w = rows.w
    wtr = w[:, :FOLDS].sum(axis=1)
    x = x.astype(np.float64, copy=False)
    mu = wtr @ x / wtr.sum()
    sd = np.sqrt(wtr @ (x - mu) ** 2 / wtr.sum())
    sd[sd < 1e-12] = 1.0
    z = np.concatenate([(x - mu) / sd, np.ones((len(x), 1))], axis=1)
    y_fit = rows.y if y_train is None else y_train
    a, b, c = _stats(z, y_fit, w)
    pen = np.eye(z.shape[1])
    pen[-1, -1] = 0.0
    best, best_sse = LAMBDAS[0], np.inf
    for lam in LAMBDAS:
        sse = 0.0
        for f in range(FOLDS):
            keep = [g for g in range(FOLDS) if g != f]
            a_tr, b_tr = a[keep].sum(axis=0), b[keep].sum(axis=0)
            beta = np.linalg.solve(a_tr + lam * w[:, keep].sum() * pen, b_tr)
            sse += _sse(beta, a[f], b[f], float(c[f]))
        if sse < best_sse:
            best, best_sse = lam, sse
    beta = np.linalg.solve(a[:FOLDS].sum(axis=0) + best * wtr.sum() * pen,
                           b[:FOLDS].sum(axis=0))
    # held-out error against the true targets
    wte = w[:, FOLDS]
    pred = z @ beta
    sse_te = float(wte @ ((rows.y - pred) ** 2).sum(axis=1))
    mean_te = wte @ rows.y / wte.sum()
    sst_te = float(wte @ ((rows.y - mean_te) ** 2).sum(axis=1))
    return 1.0 - sse_te / sst_te


def lookup_r2(keys: np.ndarray, rows: Rows) -> float:
    """Held-out R² of a lookup table: the training-weighted mean target of each key (the
    training mean for a key never seen in training)."""
    wtr = rows.w[:, :FOLDS].sum(axis=1)
    wte = rows.w[:, FOLDS]
    _, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    n = inv.max() + 1
    tot = np.zeros((n, rows.y.shape[1]))
    np.add.at(tot, inv, rows.y * wtr[:, None])
    cnt = np.bincount(inv, weights=wtr, minlength=n)
    global_mean = wtr @ rows.y / wtr.sum()
    table = np.where(cnt[:, None] > 0, tot / np.maximum(cnt, 1e-300)[:, None], global_mean)
    pred = table[inv]
    mean_te = wte @ rows.y / wte.sum()
    sse = float(wte @ ((rows.y - pred) ** 2).sum(axis=1))
    sst = float(wte @ ((rows.y - mean_te) ** 2).sum(axis=1))
    return 1.0 - sse / sst


def last_k(tokens: np.ndarray, seq: np.ndarray, turn: np.ndarray, k: int, vocab: int
           ) -> np.ndarray:
    """The last ``k`` tokens before each read-out (``vocab`` where there are fewer),
    ``[row, k]``, most recent first."""
    out = np.full((len(seq), k), vocab, dtype=np.int64)
    for j in range(k):
        pos = turn - 1 - j
        ok = pos >= 0
        out[ok, j] = tokens[seq[ok], pos[ok]]
    return out


def one_hot(keys: np.ndarray, vocab: int) -> np.ndarray:
    """One-hot columns of each key column (``vocab + 1`` categories: symbols and absent)."""
    n, k = keys.shape
    out = np.zeros((n, k * (vocab + 1)))
    for j in range(k):
        out[np.arange(n), j * (vocab + 1) + keys[:, j]] = 1.0
    return out


# ------------------------------------------------------------------------------ read-outs
def enumerated_rows(toy: Toy, rng: np.random.Generator) -> tuple[np.ndarray, Rows, np.ndarray]:
    """``(tokens, rows, prefix_prob)``: every sequence of length ``L``; rows = distinct
    prefixes of length ``1..L`` with their split weights; ``prefix_prob`` also covers turn 0
    (rows with ``turn == 0`` are appended after the regression rows, see ``n_reg``)."""
    proc = toy.process
    e = proc.enumerate_sequences()
    m, length = e.tokens.shape
    group = np.where(rng.random(m) < HELD_OUT, FOLDS, rng.integers(0, FOLDS, m))
    seqs, turns, weights = [], [], []
    for t in range(0, length + 1):
        _, first, inv = np.unique(e.tokens[:, :t], axis=0, return_index=True,
                                  return_inverse=True)
        w = np.zeros((len(first), FOLDS + 1))
        np.add.at(w, (inv.reshape(-1), group), e.prob)
        seqs.append(first)
        turns.append(np.full(len(first), t))
        weights.append(w)
    seq = np.concatenate(seqs)
    turn = np.concatenate(turns)
    w = np.concatenate(weights)
    beliefs = proc.beliefs(e.tokens)[seq, turn]
    return e.tokens, Rows(seq, turn, beliefs, w), w.sum(axis=1)


def gather(toy: Toy, tokens: np.ndarray, seq: np.ndarray, turn: np.ndarray, *,
           chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Residuals ``[layer, row, d_model]`` and next-token log-probs ``[row, vocab]`` of the
    model at each read-out (sequence ``seq``, position ``turn`` of ``<bos> tokens``)."""
    ids = with_bos(tokens, toy.bos_id)
    n_layer = int(toy.model.config.n_layer) + 1
    x = np.empty((n_layer, len(seq), int(toy.model.config.n_embd)), dtype=np.float32)
    lp = np.empty((len(seq), int(toy.model.config.vocab_size)), dtype=np.float32)
    order = np.argsort(seq, kind="stable")
    sorted_seq = seq[order]
    for lo in range(0, len(ids), chunk):
        a, b = np.searchsorted(sorted_seq, [lo, lo + chunk])
        if a == b:
            continue
        sel = order[a:b]
        r, logp = residuals(toy.model, ids[lo:lo + chunk])
        x[:, sel] = r[:, seq[sel] - lo, turn[sel]]
        lp[sel] = logp[seq[sel] - lo, turn[sel]]
    return x, lp


def layer_r2s(x: np.ndarray, rows: Rows) -> tuple[list[float], float]:
    """Held-out R² per layer and on all layers concatenated."""
    per = [ridge_r2(x[layer], rows) for layer in range(x.shape[0])]
    concat = ridge_r2(np.concatenate(list(x), axis=1), rows)
    return per, concat


def _fmt(values: Sequence[float] | np.ndarray, digits: int = 4) -> str:
    return " ".join(f"{v:.{digits}f}" for v in values)


# ------------------------------------------------------------------------------ gates
def hmm_gates(toy: Toy, name: str) -> dict[str, Any]:
    """Gates of an enumerated hidden Markov toy (``mess3``, ``rrxor``)."""
    proc = toy.process
    rng = np.random.default_rng(SPLIT_SEED)
    tokens, rows, prefix_prob = enumerated_rows(toy, rng)
    t0 = time.perf_counter()
    x, logp = gather(toy, tokens, rows.seq, rows.turn)
    vocab = len(proc.symbols)
    # exact CE per position: sum over prefixes of P(prefix) * CE(oracle next, model next)
    oracle_next = proc.next_token(tokens)[rows.seq, rows.turn]
    ce_rows = -(oracle_next * logp[:, :vocab]).sum(axis=1)
    length = proc.length
    ce = np.array([prefix_prob[rows.turn == t] @ ce_rows[rows.turn == t]
                   for t in range(length + 1)])
    optimal = proc.optimal_cross_entropy(length + 1)
    excess = ce / optimal - 1.0
    # regression rows: turns 1..L
    reg = rows.turn >= 1
    r = Rows(rows.seq[reg], rows.turn[reg], rows.y[reg], rows.w[reg])
    xr = x[:, reg]
    per, concat = layer_r2s(xr, r)
    best = int(np.argmax(per))
    perm = np.random.default_rng(SPLIT_SEED + 1).permutation(len(r.y))
    shuffled_best = ridge_r2(xr[best], r, y_train=r.y[perm])
    shuffled_concat = ridge_r2(np.concatenate(list(xr), axis=1), r, y_train=r.y[perm])
    lin = [ridge_r2(one_hot(last_k(tokens, r.seq, r.turn, k, vocab), vocab), r)
           for k in range(1, 5)]
    look = [lookup_r2(last_k(tokens, r.seq, r.turn, k, vocab), r) for k in range(1, 5)]
    model_next = np.exp(logp[reg][:, :vocab].astype(np.float64))
    from_model_pred = ridge_r2(model_next, r)
    from_oracle_pred = ridge_r2(oracle_next[reg], r)
    out = {
        "toy": name, "process": proc.name, "sequences": len(tokens),
        "regression_rows": int(reg.sum()),
        "ce_per_position": ce.tolist(), "optimal_per_position": optimal.tolist(),
        "ce_excess_per_position": excess.tolist(), "entropy_rate": proc.entropy_rate(),
        "r2_per_layer": per, "r2_concat": concat, "best_layer": best,
        "r2_shuffled_best_layer": shuffled_best, "r2_shuffled_concat": shuffled_concat,
        "r2_linear_last_k": lin, "r2_lookup_last_k": look,
        "r2_from_model_next_token": from_model_pred,
        "r2_from_oracle_next_token": from_oracle_pred,
        "seconds": time.perf_counter() - t0,
    }
    print(f"== {name} ({proc.name}, all {len(tokens)} sequences of length {length}, "
          "weighted by exact probability)")
    print(f"cross-entropy per position t=0..{length} (nats): model   {_fmt(ce)}")
    print(f"                                       optimal {_fmt(optimal)}")
    print(f"                                       excess  {_fmt(100 * excess, 2)} %")
    print(f"  entropy rate {proc.entropy_rate():.5f}; max excess at t>=2: "
          f"{100 * excess[2:].max():.2f}%")
    print(f"belief R2 per layer 0..{len(per) - 1}: {_fmt(per)}; concatenated {concat:.4f}; "
          f"best layer {best}")
    print(f"  shuffled-belief control: best layer {shuffled_best:.4f}, concatenated "
          f"{shuffled_concat:.4f}")
    print(f"  baseline linear last-k tokens k=1..4: {_fmt(lin)}")
    print(f"  baseline lookup last-k tokens k=1..4: {_fmt(look)}")
    print(f"  from the model's next-token distribution: {from_model_pred:.4f} (from the "
          f"oracle's: {from_oracle_pred:.4f})")
    if proc.name == "mess3":
        ok_ce = bool(excess[2:].max() <= 0.01)
        top = max(per[best], concat)
        ok_r2 = bool(top >= 0.98 and top > lin[3])
        ok_sh = bool(max(shuffled_best, shuffled_concat) <= 0.02)
        out["gates"] = {"ce_within_1pct_t>=2": ok_ce, "r2>=0.98_above_linear_last4": ok_r2,
                        "shuffled<=0.02": ok_sh}
    else:
        out["gates"] = {"concat>=0.9": bool(concat >= 0.9),
                        "concat_above_every_layer": bool(concat > max(per))}
    print("GATES " + name + ": " + ", ".join(f"{k} {'PASS' if v else 'FAIL'}"
                                              for k, v in out["gates"].items()))
    return out


def coin_gates(toy: Toy, name: str, n_seq: int, n_reg: int) -> dict[str, Any]:
    """Gates of the coin toy on held-out sampled sequences."""
    from belieflens.analysis.compare import updating_slope

    proc = toy.process
    assert isinstance(proc, CoinTokens)
    t0 = time.perf_counter()
    draw = proc.sample(n_seq, EVAL_SEED)
    tokens = draw.tokens
    length = proc.length
    ids = with_bos(tokens, toy.bos_id)
    resid_rows = min(n_reg, n_seq)
    # next-token log-probs at every position of every held-out sequence
    logp = np.concatenate([residuals(toy.model, ids[lo:lo + 4096])[1]
                           for lo in range(0, n_seq, 4096)])
    oracle = proc.next_token(tokens)  # [episode, turn, 2]
    p_model = np.exp(logp.astype(np.float64))
    # TVD over the whole vocabulary (the oracle puts 0 on <bos>)
    tvd = 0.5 * (np.abs(p_model[..., :2] - oracle).sum(-1) + p_model[..., 2:].sum(-1))
    targets = tokens
    ce = -np.take_along_axis(logp[:, :length], targets[..., None], axis=-1)[..., 0].mean(0)
    optimal = proc.optimal_cross_entropy(length)
    slope, slope_se, slope_n = updating_slope(p_model[..., 0], oracle[..., 0])
    # regression of the posterior mean on turns 1..L of the first n_reg sequences
    grid = np.meshgrid(np.arange(resid_rows), np.arange(1, length + 1), indexing="ij")
    seq, turn = grid[0].reshape(-1), grid[1].reshape(-1)
    rng = np.random.default_rng(SPLIT_SEED)
    group_of_seq = np.where(rng.random(resid_rows) < HELD_OUT, FOLDS,
                            rng.integers(0, FOLDS, resid_rows))
    w = np.zeros((len(seq), FOLDS + 1))
    w[np.arange(len(seq)), group_of_seq[seq]] = 1.0
    mean = proc.posterior_mean(tokens[:resid_rows])[seq, turn][:, None]
    rows = Rows(seq, turn, mean, w)
    x, _ = gather(toy, tokens[:resid_rows], seq, turn)
    per, concat = layer_r2s(x, rows)
    best = int(np.argmax(per))
    perm = np.random.default_rng(SPLIT_SEED + 1).permutation(len(seq))
    shuffled = ridge_r2(x[best], rows, y_train=mean[perm])
    pos = np.zeros((len(seq), length + 1))
    pos[np.arange(len(seq)), turn] = 1.0
    base8 = ridge_r2(np.concatenate([one_hot(last_k(tokens, seq, turn, 8, 2), 2), pos], 1),
                     rows)
    # the bin belief from the residual, for reference
    bins = proc.beliefs(tokens[:resid_rows])[seq, turn]
    bins_best = ridge_r2(x[best], Rows(seq, turn, bins, w))
    out = {
        "toy": name, "process": proc.name, "sequences": n_seq, "regression_sequences": resid_rows,
        "tvd_mean": float(tvd.mean()), "tvd_per_turn": tvd.mean(0).tolist(),
        "updating_slope": slope, "updating_slope_se": slope_se, "updating_slope_n": slope_n,
        "ce_per_position": ce.tolist(), "optimal_per_position": optimal.tolist(),
        "r2_mean_per_layer": per, "r2_mean_concat": concat, "best_layer": best,
        "r2_mean_shuffled_best_layer": shuffled, "r2_mean_baseline_last8_and_position": base8,
        "r2_bins_best_layer": bins_best, "seconds": time.perf_counter() - t0,
    }
    print(f"== {name} ({proc.name}, length {length}, {n_seq} held-out sequences; regression "
          f"on {resid_rows} of them)")
    print(f"next-flip TVD to the posterior predictive: mean {tvd.mean():.4f}; per turn "
          f"max {tvd.mean(0).max():.4f} (turn {int(tvd.mean(0).argmax())})")
    print(f"updating slope {slope:.4f} ± {slope_se:.4f} (n = {slope_n} steps)")
    print(f"cross-entropy per position (sampled) minus optimal (exact), max over t: "
          f"{(ce - optimal).max():+.4f} nats; mean model {ce.mean():.4f} vs optimal "
          f"{optimal.mean():.4f}")
    print(f"posterior-mean R2 per layer 0..{len(per) - 1}: {_fmt(per)}; concatenated "
          f"{concat:.4f}; best layer {best}")
    print(f"  baseline linear last 8 flips + position: {base8:.4f}; shuffled control "
          f"{shuffled:.4f}; bin-belief R2 at the best layer {bins_best:.4f}")
    out["gates"] = {"tvd<=0.02": bool(tvd.mean() <= 0.02),
                    "slope_in_[0.9,1.1]": bool(0.9 <= slope <= 1.1),
                    "r2_best_layer>=0.95": bool(per[best] >= 0.95)}
    print("GATES " + name + ": " + ", ".join(f"{k} {'PASS' if v else 'FAIL'}"
                                              for k, v in out["gates"].items()))
    return out


def _numbers(result: dict[str, Any]) -> dict[str, float]:
    """A toy's gate numbers: every scalar, and the best of each per-layer list."""
    out: dict[str, float] = {}
    for k, v in result.items():
        if k in ("seconds", "sequences", "regression_rows", "regression_sequences",
                 "updating_slope_n", "best_layer"):
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
        elif k.startswith("r2_") and isinstance(v, list) and v:
            out[f"{k} (best)"] = float(max(v))
        elif k == "ce_excess_per_position" and isinstance(v, list) and len(v) > 2:
            out["ce_excess max t>=2"] = float(max(v[2:]))
    return out


def spread(name: str, results: Sequence[dict[str, Any]], seeds: Sequence[int]) -> list[str]:
    """Lines: each gate number of ``name`` across ``seeds`` (min, max, values), then how
    many seeds pass each gate."""
    lines = [f"== spread of {name} across seeds {' '.join(map(str, seeds))}"]
    numbers = [_numbers(r) for r in results]
    for key in numbers[0]:
        vals = [n.get(key, float("nan")) for n in numbers]
        lines.append(f"  {key:<40} min {min(vals):.4f}  max {max(vals):.4f}  "
                     f"({' '.join(f'{v:.4f}' for v in vals)})")
    for gate in results[0]["gates"]:
        passed = sum(bool(r["gates"].get(gate)) for r in results)
        lines.append(f"  gate {gate}: {passed} of {len(results)} seeds pass")
    return lines


TABLE_ROWS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "coin-tokens": (
        ("tvd_mean", "output TVD to the posterior predictive", "{:.4f}"),
        ("updating_slope", "updating slope", "{:.4f}"),
        ("r2_mean_per_layer (best)", "posterior-mean R², best layer", "{:.4f}"),
        ("r2_mean_baseline_last8_and_position", "posterior-mean R², last 8 flips + position",
         "{:.4f}"),
        ("r2_bins_best_layer", "posterior over bins R², best layer", "{:.4f}"),
    ),
    "hmm": (
        ("ce_excess max t>=2", "largest cross-entropy excess at t ≥ 2", "{:.2%}"),
        ("r2_per_layer (best)", "belief R², best layer", "{:.4f}"),
        ("r2_concat", "belief R², all layers concatenated", "{:.4f}"),
        ("r2_shuffled_best_layer", "shuffled control, best layer", "{:.4f}"),
        ("r2_from_model_next_token", "R² from its own next-token distribution", "{:.4f}"),
    ),
}
"""Per process kind: the gate numbers of the results table (key of :func:`_numbers`, label,
format)."""


def table_rows(name: str, results: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The results table's rows of toy ``name``: each gate number across ``results`` (one
    column per run), then how many of its gates each run passes."""
    kind = "coin-tokens" if results[0]["process"] == "coin-tokens" else "hmm"
    numbers = [_numbers(r) for r in results]
    rows = [[f"`{name}` {label}", *(fmt.format(n[key]) if key in n else "—" for n in numbers)]
            for key, label, fmt in TABLE_ROWS[kind]]
    rows.append([f"`{name}` gates passed",
                 *(f"{sum(map(bool, r['gates'].values()))} of {len(r['gates'])}"
                   for r in results)])
    return rows


def _folders(toys: Sequence[str], seeds: Sequence[int] | None, seed_dir: Path | None
             ) -> list[tuple[str, str, int]]:
    """(toy, folder or name, seed) for each run."""
    from belieflens.train.toy import toy_dir

    if not seeds:
        return [(t, t, 0) for t in toys]
    out = []
    for t in toys:
        for sd in seeds:
            if sd == 0:
                out.append((t, t, 0))
                continue
            base = seed_dir or toy_dir(t).parent / "seeds"  # type: ignore[arg-type]
            out.append((t, str(base / f"{t}-seed{sd}"), sd))
    return out


def _run(toy: Toy, name: str, coin_sequences: int, coin_regression: int) -> dict[str, Any]:
    if toy.process.name == "coin-tokens":
        return coin_gates(toy, name, coin_sequences, coin_regression)
    return hmm_gates(toy, name)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the gates of each toy named on the command line (of each seed with ``--seeds``)."""
    global HELD_OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("toys", nargs="*", default=list(TOY_NAMES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--coin-sequences", type=int, default=20_000)
    ap.add_argument("--coin-regression-sequences", type=int, default=4_000)
    ap.add_argument("--held-out", type=float, default=HELD_OUT,
                    help="fraction of sequences held out of the regressions")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--seeds", type=int, nargs="*", default=None,
                    help="run each toy's seeds (0: the shipped toy) and print their spread")
    ap.add_argument("--seed-dir", type=Path, default=None,
                    help="the folder of the other seeds' toys (<name>-seed<S>)")
    add_results_option(ap)
    args = ap.parse_args(argv)
    recorder = start_results(args)
    HELD_OUT = args.held_out
    torch.set_num_threads(args.threads)
    results = []
    runs = _folders(args.toys, args.seeds, args.seed_dir)
    for name, folder, sd in runs:
        results.append(_run(load_toy(folder), f"{name} seed {sd}" if args.seeds else name,
                            args.coin_sequences, args.coin_regression_sequences))
    if args.seeds:
        for name in args.toys:
            mine = [r for (t, _, _), r in zip(runs, results, strict=True) if t == name]
            print("\n".join(spread(name, mine, args.seeds)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if recorder is not None:
        seeds = args.seeds or [0]
        rows = [row for name in args.toys for row in table_rows(
            name, [r for (t, _, _), r in zip(runs, results, strict=True) if t == name])]
        recorder.write(args.results, ["gate number", *(f"seed {s}" for s in seeds)], rows,
                       data={"runs": results})


if __name__ == "__main__":
    main()
