"""Batched forward passes through the TransformerLens bridge that keep only what is read.

For each query the runner reads, at the answer position (the last context
token), the residual stream of every layer (embeddings + every block output)
and the log-probability of each option's whole continuation. Hooks copy only
the rows at the answer positions: no activation cache is ever held.

A query whose options are all single tokens costs one row (the context). A
query with multi-token options costs one row per option (context plus the
option's tokens but the last), and log P(option) sums over all its tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from belieflens.cache.models import LoadedModel
from belieflens.probes.render import TokenizedQuery
from belieflens.types import PaddingSide


@dataclass(frozen=True)
class ReadOut:
    """What one query yields."""

    resid: Float[np.ndarray, "layer d_model"]
    option_logprob: Float[np.ndarray, " option"]
    answer_lse: float
    logprobs: Float[np.ndarray, " vocab"] | None = None
    cont_resid: Float[np.ndarray, "option cont_extra layer d_model"] | None = None


@dataclass(frozen=True)
class _Row:
    query: int
    ids: tuple[int, ...]
    answer_pos: int
    option: int | None  # None: the row reads every (single-token) option


def resid_hook_names(n_layers: int) -> list[str]:
    """Hook names whose outputs are layers 0..n_layers of the schema's ``resid``."""
    return ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(n_layers)]


def _rows(tqs: Sequence[TokenizedQuery]) -> list[_Row]:
    rows: list[_Row] = []
    for qi, tq in enumerate(tqs):
        if tq.single_token:
            rows.append(_Row(qi, tq.context_ids, tq.answer_pos, None))
        else:
            for j, cont in enumerate(tq.option_ids):
                rows.append(_Row(qi, tq.context_ids + cont[:-1], tq.answer_pos, j))
    return rows


def row_count(tq: TokenizedQuery) -> int:
    """How many forward rows a query costs."""
    return 1 if tq.single_token else len(tq.option_ids)


def run_batch(
    model: LoadedModel,
    tqs: Sequence[TokenizedQuery],
    *,
    save_logits: bool = False,
    padding_side: PaddingSide = "right",
    prefix: tuple[int, Any] | None = None,
    cont_resid: bool = False,
) -> list[ReadOut]:
    """Run one padded batch of queries and return one :class:`ReadOut` per query.

    ``prefix = (length, cache)``: every query's context starts with the same
    ``length`` tokens, already encoded in ``cache`` (a batch-1 KV cache from
    :func:`belieflens.cache.kv_cache.encode_prefix`); only the suffixes are run.
    ``cont_resid``: also return, for multi-token options, the residuals at the
    positions of continuation tokens 0..n-2 of each option's own row (the inputs
    that predict tokens 1..n-1), for the multi-token logit lens.
    """
    import torch

    from belieflens.cache.kv_cache import expand

    bridge = model.bridge
    start = 0 if prefix is None else prefix[0]
    rows = [
        _Row(r.query, r.ids[start:], r.answer_pos - start, r.option) for r in _rows(tqs)
    ]
    if any(r.answer_pos < 0 for r in rows):
        raise ValueError("a prefix must leave at least one context token to every query")
    if prefix is not None:
        padding_side = "right"  # exact without a mask: pads only follow real tokens
    n_layers = model.info.n_layers
    device = next(bridge.original_model.parameters()).device
    width = max(len(r.ids) for r in rows)
    pad = getattr(model.tokenizer, "pad_token_id", None)
    pad = 0 if pad is None else int(pad)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    offset = []
    for b, r in enumerate(rows):
        off = width - len(r.ids) if padding_side == "left" else 0
        ids[b, off : off + len(r.ids)] = torch.tensor(r.ids)
        mask[b, off : off + len(r.ids)] = 1
        offset.append(off)
    # resid is read once per query, from its first row
    first_row: dict[int, int] = {}
    for b, r in enumerate(rows):
        first_row.setdefault(r.query, b)
    q_rows = torch.tensor([first_row[q] for q in range(len(tqs))], device=device)
    q_pos = torch.tensor(
        [offset[first_row[q]] + rows[first_row[q]].answer_pos for q in range(len(tqs))],
        device=device,
    )
    captured: dict[int, Any] = {}
    extra_at: list[tuple[int, int, int]] = []  # (query, option, i) of each extra capture
    extra_b: list[int] = []
    extra_p: list[int] = []
    if cont_resid:
        for b, r in enumerate(rows):
            if r.option is None:
                continue
            for i in range(len(tqs[r.query].option_ids[r.option]) - 1):
                extra_at.append((r.query, r.option, i))
                extra_b.append(b)
                extra_p.append(offset[b] + r.answer_pos + 1 + i)
    e_rows = torch.tensor(extra_b, dtype=torch.long, device=device)
    e_pos = torch.tensor(extra_p, dtype=torch.long, device=device)
    captured_extra: dict[int, Any] = {}

    def make_hook(layer: int) -> Any:
        def hook(tensor: Any, hook: Any) -> Any:
            captured[layer] = tensor[q_rows, q_pos].detach().float().cpu()
            if extra_at:
                captured_extra[layer] = tensor[e_rows, e_pos].detach().float().cpu()
            return tensor

        return hook

    hooks = [(name, make_hook(i)) for i, name in enumerate(resid_hook_names(n_layers))]
    # read positions (padded coordinates): the unembedding runs only there
    read_b: list[int] = []
    read_p: list[int] = []
    for b, r in enumerate(rows):
        n_read = 1 if r.option is None else len(tqs[r.query].option_ids[r.option])
        for i in range(n_read):
            read_b.append(b)
            read_p.append(offset[b] + r.answer_pos + i)
    keep = sorted(set(read_p))
    col = {p: i for i, p in enumerate(keep)}
    kwargs: dict[str, Any] = {"logits_to_keep": torch.tensor(keep, device=device)}
    if prefix is not None:
        kwargs["past_key_values"] = expand(prefix[1], len(rows))
    if padding_side == "left" and bool((mask == 0).any()):
        kwargs["attention_mask"] = mask.to(device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs["position_ids"] = pos.to(device)
    with torch.inference_mode():
        logits = bridge.run_with_hooks(ids.to(device), fwd_hooks=hooks, **kwargs)
    with torch.inference_mode():
        sel = logits[
            torch.tensor(read_b, device=device),
            torch.tensor([col[p] for p in read_p], device=device),
        ]
        logp = torch.log_softmax(sel.float(), dim=-1)
        lse = torch.logsumexp(sel.float(), dim=-1).cpu().numpy()
    logp_np = logp.cpu().numpy() if save_logits else None
    resid = torch.stack([captured[i] for i in range(n_layers + 1)], dim=1).numpy()
    conts: list[np.ndarray | None] = [None] * len(tqs)
    if extra_at:
        ex = torch.stack([captured_extra[i] for i in range(n_layers + 1)], dim=1).numpy()
        for (q, j, i), vec in zip(extra_at, ex, strict=True):
            if conts[q] is None:
                n_extra = max(len(c) for c in tqs[q].option_ids) - 1
                conts[q] = np.full(
                    (len(tqs[q].option_ids), n_extra, n_layers + 1, resid.shape[-1]), np.nan,
                    dtype=np.float32,
                )
            conts[q][j, i] = vec  # type: ignore[index]
    out_lp = [np.zeros(len(tq.option_ids), dtype=np.float64) for tq in tqs]
    answer_lse = [0.0] * len(tqs)
    full: list[np.ndarray | None] = [None] * len(tqs)
    k = 0
    for r in rows:
        tq = tqs[r.query]
        if r.option is None:
            targets = torch.tensor([c[0] for c in tq.option_ids])
            out_lp[r.query][:] = logp[k, targets].double().cpu().numpy()
            answer_lse[r.query] = float(lse[k])
            if logp_np is not None:
                full[r.query] = logp_np[k]
            k += 1
        else:
            cont = tq.option_ids[r.option]
            vals = logp[torch.arange(k, k + len(cont)), torch.tensor(cont)]
            out_lp[r.query][r.option] = float(vals.double().sum())
            if r.option == 0:
                answer_lse[r.query] = float(lse[k])
                if logp_np is not None:
                    full[r.query] = logp_np[k]
            k += len(cont)
    return [
        ReadOut(resid=resid[q], option_logprob=out_lp[q], answer_lse=answer_lse[q],
                logprobs=full[q], cont_resid=conts[q])
        for q in range(len(tqs))
    ]


def plan_batches(
    tqs: Sequence[TokenizedQuery], *, max_rows: int, max_tokens: int, start: int = 0
) -> list[list[int]]:
    """Group query indices into length-bucketed batches under a row and padded-token budget.

    Queries are sorted by length so that a batch pads little; a query's rows are
    never split across batches. ``start`` tokens of every context are already encoded
    (a shared prefix) and do not count.
    """
    order = sorted(range(len(tqs)), key=lambda i: len(tqs[i].context_ids))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_rows = 0
    cur_width = 0
    for i in order:
        tq = tqs[i]
        n = row_count(tq)
        w = len(tq.context_ids) - start + max(len(c) for c in tq.option_ids)
        width = max(cur_width, w)
        if cur and (cur_rows + n > max_rows or (cur_rows + n) * width > max_tokens):
            batches.append(cur)
            cur, cur_rows, width = [], 0, w
        cur.append(i)
        cur_rows += n
        cur_width = width
    if cur:
        batches.append(cur)
    return batches


def _lcp(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefix_groups(
    tqs: Sequence[TokenizedQuery], *, min_prefix: int = 16, keep: float = 0.75
) -> list[tuple[list[int], int]]:
    """Group queries that share a long token prefix: ``[(indices, prefix_length), ...]``.

    Queries are sorted by their context tokens; a group grows while the prefix all
    its members share stays at least ``keep`` times the prefix it started with (and
    at least ``min_prefix`` tokens). Each prefix leaves at least one context token
    to every member, so every answer position is computed in the suffix run.
    Groups whose prefix is shorter than ``min_prefix`` have prefix length 0.
    """
    order = sorted(range(len(tqs)), key=lambda i: tqs[i].context_ids)
    groups: list[tuple[list[int], int]] = []
    i = 0
    while i < len(order):
        first = tqs[order[i]].context_ids
        members = [order[i]]
        shared = len(first) - 1
        initial = -1
        j = i + 1
        while j < len(order):
            ctx = tqs[order[j]].context_ids
            p = min(_lcp(first, ctx, shared), len(ctx) - 1)
            if initial < 0:
                initial = p
            if p < min_prefix or p < keep * initial:
                break
            shared = p
            members.append(order[j])
            j += 1
        groups.append((members, shared if shared >= min_prefix else 0))
        i = j
    return groups


def run_queries(
    model: LoadedModel,
    tqs: Sequence[TokenizedQuery],
    *,
    max_rows: int,
    max_tokens: int,
    save_logits: bool = False,
    padding_side: PaddingSide = "right",
    reuse_prefix: bool = True,
    cont_resid: bool = False,
) -> Iterator[tuple[list[int], list[ReadOut], int]]:
    """Run all queries; yield ``(indices, read-outs, tokens computed)`` batch by batch.

    With ``reuse_prefix`` (and a model that passed the KV-cache self-check) each
    group's shared prefix is encoded once and only the suffixes are batched.
    """
    from belieflens.cache.kv_cache import encode_prefix

    use = reuse_prefix and model.info.prefix_reuse
    groups = prefix_groups(tqs) if use else [(list(range(len(tqs))), 0)]
    for members, start in groups:
        sub = [tqs[i] for i in members]
        cache = encode_prefix(model.bridge, list(sub[0].context_ids[:start])) if start else None
        first = True
        for batch in plan_batches(sub, max_rows=max_rows, max_tokens=max_tokens, start=start):
            outs = run_batch(
                model, [sub[i] for i in batch], save_logits=save_logits,
                padding_side=padding_side, prefix=(start, cache) if cache is not None else None,
                cont_resid=cont_resid,
            )
            tokens = sum(len(sub[i].context_ids) - start for i in batch)
            tokens += start if first else 0
            first = False
            yield [members[i] for i in batch], outs, tokens
