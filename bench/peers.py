"""Side by side with the field's tools: the same read-outs through belieflens, nnsight and
TransformerLens, in one process, in rotating order.

The workload is the coin-flip multi-turn study on SmolLM2-135M (both probes, every rotation):
for every read-out, the residual stream of every layer at the answer position (embeddings and
every block's output: the schema's ``resid``) and the log-probability of each option's whole
continuation. Each tool runs exactly the forward rows belieflens's plain runner would (a query
with single-token options is one row; one with multi-token options a row per option):

- ``belieflens``: ``belieflens extract`` into a cache file (its defaults: the token radix tree,
  hooks and unembedding at the read positions only, kernels as ``--kernels``);
- ``nnsight``: a ``TransformersModel`` over the plain transformers model; one trace per batch
  of ``--batch`` rows, one ``tracer.invoke`` per row as nnsight's docs batch prompts (nnsight
  left-pads and sets the position ids), saving the embedding output and every decoder
  layer's output at the answer position and the head's logits at the read positions;
- ``transformerlens``: ``run_with_cache`` on the TransformerBridge with a ``names_filter`` for
  the residual hooks (``blocks.0.hook_resid_pre``, ``blocks.L.hook_resid_post``), ``--batch``
  rows per call, right-padded (causal attention: the pad after a row's tokens changes none of
  its positions), the answer positions gathered from the cache.

Rows are batched shortest first for both peers, as a careful user would. The peers run on the
default kernels (what a user of them gets); belieflens on ``--kernels`` (default ``auto``:
oneDNN where it passes its check). Every round runs each tool once, the order rotating;
the first round's values are compared with belieflens's (the largest absolute residual
difference, relative to the largest residual, and the largest option log-prob difference).

A peer that is not installed is skipped with the extra to install
(``pip install 'belieflens[bench]'``); the bench never runs in ``make test``.

Last line: ``belieflens_s=... nnsight_s=... transformerlens_s=... vs_nnsight=...
vs_transformerlens=...`` (medians over the rounds; ``vs_X`` = X's time / belieflens's).
Run: ``.venv/bin/python -m bench.peers [--episodes 4 --turns 6 --batch 16 --rounds 3]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from belieflens.model.load import LoadedModel, load
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.rows import Row, forward_rows, pad_token_id, resid_hook_names
from bench._lib import (
    bench_env,
    now,
    parse_timed,
    queries,
    write_line_results,
)

EXTRA = "pip install 'belieflens[bench]'"
"""How to install the peers (the ``bench`` extra of pyproject.toml)."""


@dataclass(frozen=True)
class Result:
    """One tool's read-outs: ``resid[query, layer, d_model]``, ``logprob[query, option]``."""

    seconds: float
    resid: np.ndarray
    logprob: np.ndarray


def _readouts(tqs: Sequence[TokenizedQuery], rows: Sequence[Row], resid: dict[int, Any],
              logp: dict[int, Any], seconds: float) -> Result:
    """Assemble per-query results from per-row captures: ``resid[b]`` (``[layer, d_model]``,
    the query's first row) and ``logp[b]`` (``[read position, vocab]`` log-probs)."""
    n_opt = max(len(tq.option_ids) for tq in tqs)
    out_r = np.zeros((len(tqs), *next(iter(resid.values())).shape), dtype=np.float32)
    out_lp = np.full((len(tqs), n_opt), np.nan)
    seen: set[int] = set()
    for b, r in enumerate(rows):
        tq = tqs[r.query]
        if r.query not in seen:
            seen.add(r.query)
            out_r[r.query] = resid[b]
        lp = logp[b]
        if r.option is None:
            for j, cont in enumerate(tq.option_ids):
                out_lp[r.query, j] = float(lp[0, cont[0]])
        else:
            cont = tq.option_ids[r.option]
            out_lp[r.query, r.option] = float(sum(lp[i, t] for i, t in enumerate(cont)))
    return Result(seconds, out_r, out_lp)


def _n_read(tq: TokenizedQuery, r: Row) -> int:
    return 1 if r.option is None else len(tq.option_ids[r.option])


def _batches(rows: Sequence[Row], size: int) -> list[list[int]]:
    order = sorted(range(len(rows)), key=lambda b: (len(rows[b].ids), b))
    return [order[i:i + size] for i in range(0, len(order), size)]


def run_belieflens(model: LoadedModel, env_args: tuple[Any, int],
                   tqs: Sequence[TokenizedQuery], rows: Sequence[Row], batch: int) -> Result:
    """``belieflens extract`` of the study into a cache file, then its values read back."""
    import belieflens
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    env, episodes = env_args
    with tempfile.TemporaryDirectory() as tmp:
        t0 = now()
        path = write_cache(env, model, Path(tmp) / "peers.h5", ExtractOptions(episodes=episodes))
        seconds = now() - t0
        ds = belieflens.open_cache(path)
        resid = np.asarray(ds["resid"].values, dtype=np.float32)
        logprob = np.asarray(ds["option_logprob"].values, dtype=np.float64)
        ds.close()
    return Result(seconds, resid, logprob)


def run_transformerlens(model: LoadedModel, env_args: tuple[Any, int],
                        tqs: Sequence[TokenizedQuery], rows: Sequence[Row],
                        batch: int) -> Result:
    """``run_with_cache`` on the bridge with a ``names_filter``, ``batch`` rows a call."""
    names = resid_hook_names(model.info.n_layers)
    wanted = set(names)
    pad = pad_token_id(model.tokenizer)
    resid: dict[int, Any] = {}
    logp: dict[int, Any] = {}
    t0 = now()
    with torch.inference_mode():
        for idx in _batches(rows, batch):
            width = max(len(rows[b].ids) for b in idx)
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            for k, b in enumerate(idx):
                ids[k, :len(rows[b].ids)] = torch.tensor(rows[b].ids)
            logits, cache = model.bridge.run_with_cache(ids, names_filter=lambda n: n in wanted)
            for k, b in enumerate(idx):
                r = rows[b]
                resid[b] = torch.stack([cache[n][k, r.answer_pos] for n in names]).numpy()
                at = slice(r.answer_pos, r.answer_pos + _n_read(tqs[r.query], r))
                logp[b] = torch.log_softmax(logits[k, at].float(), dim=-1).numpy()
            del cache, logits
    return _readouts(tqs, rows, resid, logp, now() - t0)


def run_nnsight(peer: Any, env_args: tuple[Any, int], tqs: Sequence[TokenizedQuery],
                rows: Sequence[Row], batch: int) -> Result:
    """One nnsight trace per ``batch`` rows, one ``tracer.invoke`` per row (left-padded by
    nnsight): the embedding and every layer's output at the answer position, the logits at
    the read positions."""
    from nnsight import save

    n_layers = len(peer.model.layers)
    resid: dict[int, Any] = {}
    logp: dict[int, Any] = {}
    t0 = now()
    with torch.inference_mode():
        for idx in _batches(rows, batch):
            with peer.trace() as tracer:
                got = save([])
                for b in idx:
                    r = rows[b]
                    back = r.answer_pos - len(r.ids)  # from the end: padding on the left
                    n = _n_read(tqs[r.query], r)
                    with tracer.invoke(list(r.ids)):
                        layers = [peer.model.embed_tokens.output[0, back].save()]
                        layers += [peer.model.layers[i].output[0, back].save()
                                   for i in range(n_layers)]
                        logits = peer.lm_head.output[0, back:back + n or None].save()
                        got.append((layers, logits))
            for b, (layers, logits) in zip(idx, got, strict=True):
                resid[b] = torch.stack(list(layers)).numpy()
                logp[b] = torch.log_softmax(logits.float(), dim=-1).numpy()
    return _readouts(tqs, rows, resid, logp, now() - t0)


def _peers(loaded: LoadedModel) -> dict[str, tuple[Callable[..., Result], Any]]:
    """The tools that are installed, each with the model it runs on; a missing one is named
    with the extra to install."""
    tools: dict[str, tuple[Callable[..., Result], Any]] = {}
    if importlib.util.find_spec("nnsight") is None:
        print(f"nnsight: not installed, skipped ({EXTRA})")
    else:
        from nnsight import TransformersModel
        from transformers import AutoModelForCausalLM

        plain = AutoModelForCausalLM.from_pretrained(loaded.info.weights_cache,
                                                     dtype=torch.float32)
        plain.eval()  # type: ignore[no-untyped-call]  # transformers leaves eval unannotated
        tools["nnsight"] = (run_nnsight, TransformersModel(plain, tokenizer=loaded.tokenizer))
    if importlib.util.find_spec("transformer_lens") is None:
        print(f"transformerlens: not installed, skipped ({EXTRA})")
    else:
        tools["transformerlens"] = (run_transformerlens, load("smollm2-135m", kernels="default"))
    return tools


def compare(name: str, ours: Result, theirs: Result) -> str:
    """How far ``theirs`` is from belieflens's values (one line)."""
    scale = float(np.abs(ours.resid).max())
    diff = float(np.abs(ours.resid - theirs.resid).max())
    lp = float(np.nanmax(np.abs(ours.logprob - theirs.logprob)))
    ok = diff <= 1e-4 * scale and lp <= 1e-2
    return (f"{name}: resid max |diff| {diff:.3g} (max |resid| {scale:.3g}, relative "
            f"{diff / scale:.2g}), option log-prob max |diff| {lp:.2g}: "
            f"{'equal within float tolerance' if ok else 'DIFFERENT'}")


def main() -> None:
    """Run every installed tool ``--rounds`` times in rotating order; print times and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--batch", type=int, default=16, help="rows per call of the peers")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernels", default="auto", help="belieflens's CPU kernels")
    args, recorder = parse_timed(ap)
    loaded = load("smollm2-135m", kernels=args.kernels)
    env = bench_env("coin-flip", args.turns)
    tqs = queries(loaded, env, args.episodes)
    rows = forward_rows(tqs)
    print(f"workload: coin flip, multi-turn, {args.turns} turns, {args.episodes} episodes: "
          f"{len(tqs)} read-outs, {len(rows)} forward rows, "
          f"{sum(len(r.ids) for r in rows)} tokens; threads={torch.get_num_threads()} "
          f"clock={args.clock} belieflens kernels={loaded.info.kernels}, peers default")
    tools: dict[str, tuple[Callable[..., Result], Any]] = {
        "belieflens": (run_belieflens, loaded), **_peers(loaded)}
    times: dict[str, list[float]] = {name: [] for name in tools}
    first: dict[str, Result] = {}
    names = list(tools)
    for rnd in range(args.rounds):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            fn, model = tools[name]
            res = fn(model, (env, args.episodes), tqs, rows, args.batch)
            times[name].append(res.seconds)
            first.setdefault(name, res)
            print(f"round {rnd + 1} {name}: {res.seconds:.1f}s", flush=True)
    for name in names[1:]:
        print(compare(name, first["belieflens"], first[name]))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    line = " ".join(f"{name}_s={med[name]:.1f}" for name in names)
    line += "".join(f" vs_{name}={med[name] / med['belieflens']:.2f}" for name in names[1:])
    print(line)
    write_line_results(recorder, args.results, line)


if __name__ == "__main__":
    main()
