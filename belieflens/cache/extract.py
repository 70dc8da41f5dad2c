"""Extraction: environment -> queries -> tokens -> batched forward -> cache file."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from belieflens.cache import runner
from belieflens.cache.lens_params import final_norm, unembedding
from belieflens.cache.models import LoadedModel
from belieflens.cache.provenance import provenance
from belieflens.cache.store import CacheWriter, Sizes
from belieflens.envs.base import Environment, Query
from belieflens.errors import ParameterError
from belieflens.probes.render import TokenizedQuery, bos_policy, render
from belieflens.types import PaddingSide, StoreDTypeName


@dataclass(frozen=True)
class QueryRecord:
    """One read-out with what it is: the unit of a cache file's ``query`` dimension."""

    episode: int
    turn: int
    probe: str
    kind: str
    delivery: str
    rotation: int
    labels: tuple[str, ...]
    oracle: tuple[float, ...] | None
    query: Query
    truth: Mapping[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    """A progress report: rows done of total, tokens processed so far."""

    done: int
    total: int
    tokens: int
    seconds: float


@dataclass(frozen=True)
class ExtractOptions:
    """Options of one extraction run."""

    episodes: int = 4
    seed: int = 0
    max_rows: int = 16
    max_tokens: int = 8192
    save_logits: bool = False
    padding_side: PaddingSide = "right"
    resid_dtype: StoreDTypeName = "float32"
    window: int = 256
    threads: int = 0
    reuse_prefix: bool = True
    cont_resid: bool = False

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ParameterError(f"option '--episodes' = {self.episodes} is not allowed: >= 1")
        if self.max_rows < 1:
            raise ParameterError(f"option '--batch-size' = {self.max_rows} is not allowed: >= 1")
        if self.window < 1:
            raise ParameterError(f"window = {self.window} is not allowed: >= 1")


def records(env: Environment, episodes: int, seed: int) -> Iterator[QueryRecord]:
    """Flatten an environment's episodes into query records, in a deterministic order."""
    for ep in env.episodes(episodes, seed):
        for turn in ep.turns:
            for probe in turn.probes:
                for q in probe.queries:
                    yield QueryRecord(
                        episode=ep.index, turn=turn.index, probe=probe.name, kind=probe.kind,
                        delivery=probe.delivery, rotation=q.rotation, labels=probe.labels,
                        oracle=probe.oracle, query=q, truth=ep.truth,
                    )


def _pad2(rows: Sequence[Sequence[int]], width: int) -> np.ndarray:
    out = np.full((len(rows), width), -1, dtype=np.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


TRUTH_PREFIX = "truth_"
"""Episode truth values (latent state, scenario variables) are stored as ``truth_<key>``."""


def truth_schema(recs: Sequence[QueryRecord]) -> dict[str, tuple[tuple[str, ...], str, str]]:
    """One ``(query,)`` variable per episode-truth key: text if any value is text, else float."""
    kinds: dict[str, str] = {}
    for r in recs:
        for k, v in r.truth.items():
            if isinstance(v, str) or kinds.get(k) == "str":
                kinds[k] = "str"
            else:
                kinds.setdefault(k, "f8")
    return {
        f"{TRUTH_PREFIX}{k}": (("query",), kind, f"episode truth {k!r}")
        for k, kind in sorted(kinds.items())
    }


def _truth_rows(
    recs: Sequence[QueryRecord], schema: Mapping[str, tuple[tuple[str, ...], str, str]]
) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, (_, kind, _) in schema.items():
        key = name[len(TRUTH_PREFIX):]
        if kind == "str":
            out[name] = np.array([str(r.truth.get(key, "")) for r in recs], dtype=object)
        else:
            out[name] = np.array(
                [float(r.truth.get(key, np.nan)) for r in recs], dtype=np.float64
            )
    return out


def _static_rows(
    recs: Sequence[QueryRecord], tqs: Sequence[TokenizedQuery], sizes: Sizes,
    lens_index: dict[int, int], env_name: str,
) -> dict[str, np.ndarray]:
    n = len(recs)
    option_ids = np.full((n, sizes.option, sizes.cont_token), -1, dtype=np.int32)
    lens_idx = np.full_like(option_ids, -1)
    outcome = np.full((n, sizes.option), -1, dtype=np.int32)
    labels = np.full((n, sizes.outcome), "", dtype=object)
    oracle = np.full((n, sizes.outcome), np.nan)
    for i, (rec, tq) in enumerate(zip(recs, tqs, strict=True)):
        for j, cont in enumerate(tq.option_ids):
            option_ids[i, j, : len(cont)] = cont
            lens_idx[i, j, : len(cont)] = [lens_index[t] for t in cont]
        outcome[i, : len(tq.outcome)] = tq.outcome
        labels[i, : len(rec.labels)] = rec.labels
        if rec.oracle is not None:
            oracle[i, : len(rec.oracle)] = rec.oracle
    return {
        "input_ids": _pad2([tq.context_ids for tq in tqs], sizes.token),
        "answer_pos": np.array([tq.answer_pos for tq in tqs], dtype=np.int32),
        "option_ids": option_ids,
        "option_lens_index": lens_idx,
        "outcome": outcome,
        "outcome_label": labels,
        "oracle": oracle,
        "n_outcome": np.array([len(r.labels) for r in recs], dtype=np.int32),
        "prompt": np.array([tq.context_text for tq in tqs], dtype=object),
        "episode": np.array([r.episode for r in recs], dtype=np.int32),
        "turn": np.array([r.turn for r in recs], dtype=np.int32),
        "rotation": np.array([r.rotation for r in recs], dtype=np.int32),
        "probe": np.array([r.probe for r in recs], dtype=object),
        "kind": np.array([r.kind for r in recs], dtype=object),
        "env": np.array([env_name] * n, dtype=object),
        "delivery": np.array([r.delivery for r in recs], dtype=object),
    }


def extract(
    env: Environment,
    model: LoadedModel,
    out: Path,
    options: ExtractOptions,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    extra_attrs: dict[str, Any] | None = None,
) -> Path:
    """Run every read-out of ``options.episodes`` episodes of ``env`` and write ``out``.

    Returns the path of the finished file. Queries are rendered first (cheap),
    then run window by window; each window is written and flushed before the next.
    """
    import torch

    recs = list(records(env, options.episodes, options.seed))
    if not recs:
        raise ParameterError("the environment produced no read-outs for these parameters")
    bos = bos_policy(model.tokenizer)
    tqs = [render(model.tokenizer, r.query, bos=bos) for r in recs]
    lens_ids = sorted({t for tq in tqs for cont in tq.option_ids for t in cont})
    lens_index = {t: i for i, t in enumerate(lens_ids)}
    sizes = Sizes(
        query=len(recs),
        layer=model.info.n_layers + 1,
        d_model=model.info.d_model,
        token=max(len(tq.context_ids) for tq in tqs),
        option=max(len(tq.option_ids) for tq in tqs),
        cont_token=max(len(c) for tq in tqs for c in tq.option_ids),
        outcome=max(len(r.labels) for r in recs),
        lens_token=len(lens_ids),
        vocab=model.info.vocab_size if options.save_logits else 0,
        cont_extra=(
            max(len(c) for tq in tqs for c in tq.option_ids) - 1 if options.cont_resid else 0
        ),
    )
    threads = torch.get_num_threads()
    attrs = provenance(
        model.info,
        env=getattr(env, "name", type(env).__name__),
        env_params=dataclasses.asdict(env.params),  # type: ignore[call-overload]
        seed=options.seed,
        episodes=options.episodes,
        threads=threads,
        extra={"padding_side": options.padding_side, "resid_dtype": options.resid_dtype,
               "save_logits": options.save_logits,
               "prefix_reuse": options.reuse_prefix and model.info.prefix_reuse,
               **(extra_attrs or {})},
    )
    norm = final_norm(model.bridge)
    unemb = unembedding(model.bridge, np.array(lens_ids, dtype=np.int64))
    attrs.update({"final_norm_kind": norm.kind, "final_norm_eps": norm.eps})
    out.parent.mkdir(parents=True, exist_ok=True)
    tschema = truth_schema(recs)
    writer = CacheWriter(out, sizes, attrs, resid_dtype=options.resid_dtype, extra=tschema)
    ok = False
    try:
        writer.write_static({
            "lens_token_id": unemb.token_ids.astype(np.int32),
            "unembed": unemb.weight.astype(np.float32),
            "unembed_bias": unemb.bias.astype(np.float32),
            "final_norm_gain": norm.gain,
            "final_norm_bias": norm.bias,
        })
        env_name = str(attrs["env_name"])
        t0 = time.perf_counter()
        tokens = 0
        for start in range(0, len(recs), options.window):
            stop = min(start + options.window, len(recs))
            w_tqs = tqs[start:stop]
            results: list[runner.ReadOut | None] = [None] * len(w_tqs)
            for batch, outs, n_tok in runner.run_queries(
                model, w_tqs, max_rows=options.max_rows, max_tokens=options.max_tokens,
                save_logits=options.save_logits, padding_side=options.padding_side,
                reuse_prefix=options.reuse_prefix, cont_resid=options.cont_resid,
            ):
                for i, o in zip(batch, outs, strict=True):
                    results[i] = o
                tokens += n_tok
                if on_progress is not None:
                    done = start + sum(r is not None for r in results)
                    on_progress(Progress(done, len(recs), tokens, time.perf_counter() - t0))
            done_results = [r for r in results if r is not None]
            values = _static_rows(recs[start:stop], w_tqs, sizes, lens_index, env_name)
            values.update(_truth_rows(recs[start:stop], tschema))
            values["resid"] = np.stack([r.resid for r in done_results])
            values["option_logprob"] = np.full((stop - start, sizes.option), np.nan)
            for i, r in enumerate(done_results):
                values["option_logprob"][i, : len(r.option_logprob)] = r.option_logprob
            values["answer_lse"] = np.array([r.answer_lse for r in done_results])
            if sizes.cont_extra > 0:
                cr = np.full((stop - start, sizes.option, sizes.cont_extra, sizes.layer,
                              sizes.d_model), np.nan, dtype=np.float32)
                for i, r in enumerate(done_results):
                    if r.cont_resid is not None:
                        o, e = r.cont_resid.shape[:2]
                        cr[i, :o, :e] = r.cont_resid
                values["cont_resid"] = cr
            if options.save_logits:
                values["logprobs"] = np.stack(
                    [np.asarray(r.logprobs, dtype=np.float32) for r in done_results]
                )
            writer.write_rows(start, values)
        ok = True
    finally:
        path = writer.close(complete=ok)
    return path
