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

from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np

from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.rows import (
    ReadOut,
    Row,
    forward_rows,
    pad_token_id,
    resid_capture_hooks,
    resid_hook_names,
    row_count,
)
from belieflens.run.trie_runner import ROW_TOKENS as ROW_TOKENS
from belieflens.run.trie_runner import run_trie
from belieflens.types import PaddingSide

__all__ = [
    "ReadOut",
    "forward_rows",
    "plan_batches",
    "resid_hook_names",
    "row_count",
    "run_batch",
    "run_queries",
]


def run_batch(
    model: LoadedModel,
    tqs: Sequence[TokenizedQuery],
    *,
    save_logits: bool = False,
    padding_side: PaddingSide = "right",
    cont_resid: bool = False,
) -> list[ReadOut]:
    """Run one padded batch of queries and return one :class:`ReadOut` per query.

    ``cont_resid``: also return, for multi-token options, the residuals at the
    positions of continuation tokens 0..n-2 of each option's own row (the inputs
    that predict tokens 1..n-1), for the multi-token logit lens.
    """
    import torch

    rows = forward_rows(tqs)
    n_layers = model.info.n_layers
    device = next(model.bridge.original_model.parameters()).device
    ids, mask, offset = _padded_ids(rows, pad_token_id(model.tokenizer), padding_side)
    q_rows, q_pos = _answer_positions(rows, len(tqs), offset)
    # (query, option, i) of each extra capture
    extra_at, extra_b, extra_p = (
        _cont_positions(rows, tqs, offset) if cont_resid else ([], [], [])
    )
    extra = (
        (torch.tensor(extra_b, dtype=torch.long, device=device),
         torch.tensor(extra_p, dtype=torch.long, device=device))
        if extra_at else None
    )
    hooks, captured, captured_extra = resid_capture_hooks(
        resid_hook_names(n_layers),
        (torch.tensor(q_rows, device=device), torch.tensor(q_pos, device=device)), extra,
    )
    logp, lse = _forward(model, ids, mask, hooks, _read_positions(rows, tqs, offset),
                         padding_side=padding_side, device=device)
    logp_np = logp.cpu().numpy() if save_logits else None
    resid = torch.stack([captured[i] for i in range(n_layers + 1)], dim=1).numpy()
    conts: list[np.ndarray | None] = [None] * len(tqs)
    if extra_at:
        ex = torch.stack([captured_extra[i] for i in range(n_layers + 1)], dim=1).numpy()
        conts = _cont_arrays(tqs, extra_at, ex, n_layers, resid.shape[-1])
    out_lp, answer_lse, full = _option_logprobs(rows, tqs, logp, lse, logp_np)
    return [
        ReadOut(resid=resid[q], option_logprob=out_lp[q], answer_lse=answer_lse[q],
                logprobs=full[q], cont_resid=conts[q])
        for q in range(len(tqs))
    ]


def _forward(
    model: LoadedModel, ids: Any, mask: Any, hooks: list[tuple[str, Any]],
    reads: tuple[list[int], list[int]], *, padding_side: PaddingSide, device: Any,
) -> tuple[Any, np.ndarray]:
    """Run the batch with ``hooks``; log-probs and log-sum-exp at the read positions, in order.

    The unembedding runs only at the read positions (``reads``: batch rows and padded
    positions).
    """
    import torch

    read_b, read_p = reads
    keep = sorted(set(read_p))
    col = {p: i for i, p in enumerate(keep)}
    kwargs: dict[str, Any] = {"logits_to_keep": torch.tensor(keep, device=device)}
    if padding_side == "left" and bool((mask == 0).any()):
        kwargs["attention_mask"] = mask.to(device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs["position_ids"] = pos.to(device)
    with torch.inference_mode():
        logits = model.bridge.run_with_hooks(ids.to(device), fwd_hooks=hooks, **kwargs)
    with torch.inference_mode():
        sel = logits[
            torch.tensor(read_b, device=device),
            torch.tensor([col[p] for p in read_p], device=device),
        ]
        logp = torch.log_softmax(sel.float(), dim=-1)
        lse = torch.logsumexp(sel.float(), dim=-1).cpu().numpy()
    return logp, lse


def _answer_positions(
    rows: Sequence[Row], n_queries: int, offset: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Batch row and padded answer position of each query: its first row (resid is read once)."""
    first_row: dict[int, int] = {}
    for b, r in enumerate(rows):
        first_row.setdefault(r.query, b)
    q_rows = [first_row[q] for q in range(n_queries)]
    return q_rows, [offset[b] + rows[b].answer_pos for b in q_rows]


def _padded_ids(
    rows: Sequence[Row], pad: int, padding_side: PaddingSide
) -> tuple[Any, Any, list[int]]:
    """The rows' token ids padded to one width, their attention mask and each row's offset."""
    import torch

    width = max(len(r.ids) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    offset = []
    for b, r in enumerate(rows):
        off = width - len(r.ids) if padding_side == "left" else 0
        ids[b, off : off + len(r.ids)] = torch.tensor(r.ids)
        mask[b, off : off + len(r.ids)] = 1
        offset.append(off)
    return ids, mask, offset


def _cont_positions(
    rows: Sequence[Row], tqs: Sequence[TokenizedQuery], offset: Sequence[int]
) -> tuple[list[tuple[int, int, int]], list[int], list[int]]:
    """``(query, option, i)``, batch row and padded position of every continuation residual."""
    extra_at: list[tuple[int, int, int]] = []
    extra_b: list[int] = []
    extra_p: list[int] = []
    for b, r in enumerate(rows):
        if r.option is None:
            continue
        for i in range(len(tqs[r.query].option_ids[r.option]) - 1):
            extra_at.append((r.query, r.option, i))
            extra_b.append(b)
            extra_p.append(offset[b] + r.answer_pos + 1 + i)
    return extra_at, extra_b, extra_p


def _read_positions(
    rows: Sequence[Row], tqs: Sequence[TokenizedQuery], offset: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Batch row and padded position of every position whose logits are read, in row order."""
    read_b: list[int] = []
    read_p: list[int] = []
    for b, r in enumerate(rows):
        n_read = 1 if r.option is None else len(tqs[r.query].option_ids[r.option])
        for i in range(n_read):
            read_b.append(b)
            read_p.append(offset[b] + r.answer_pos + i)
    return read_b, read_p


def _cont_arrays(
    tqs: Sequence[TokenizedQuery], extra_at: Sequence[tuple[int, int, int]], ex: np.ndarray,
    n_layers: int, d_model: int,
) -> list[np.ndarray | None]:
    """Per query: its continuation residuals ``[option, cont_extra, layer, d_model]``."""
    conts: list[np.ndarray | None] = [None] * len(tqs)
    for (q, j, i), vec in zip(extra_at, ex, strict=True):
        arr = conts[q]
        if arr is None:
            n_extra = max(len(c) for c in tqs[q].option_ids) - 1
            arr = conts[q] = np.full(
                (len(tqs[q].option_ids), n_extra, n_layers + 1, d_model), np.nan,
                dtype=np.float32,
            )
        arr[j, i] = vec
    return conts


def _option_logprobs(
    rows: Sequence[Row], tqs: Sequence[TokenizedQuery], logp: Any, lse: np.ndarray,
    logp_np: np.ndarray | None,
) -> tuple[list[np.ndarray], list[float], list[np.ndarray | None]]:
    """Per query: log P of each option, the answer position's log-sum-exp and full log-probs."""
    import torch

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
    return out_lp, answer_lse, full


def plan_batches(
    tqs: Sequence[TokenizedQuery], *, max_rows: int, max_tokens: int
) -> list[list[int]]:
    """Group query indices into length-bucketed batches under a row and padded-token budget.

    Queries are sorted by length so that a batch pads little; a query's rows are
    never split across batches.
    """
    order = sorted(range(len(tqs)), key=lambda i: len(tqs[i].context_ids))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_rows = 0
    cur_width = 0
    for i in order:
        tq = tqs[i]
        n = row_count(tq)
        w = len(tq.context_ids) + max(len(c) for c in tq.option_ids)
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


def run_queries(model: LoadedModel, tqs: Sequence[TokenizedQuery], *, max_rows: int,
                max_tokens: int, row_tokens: int = ROW_TOKENS, save_logits: bool = False,
                padding_side: PaddingSide = "right", reuse_prefix: bool = True,
                cont_resid: bool = False, skip: Collection[int] = (),
                retain_bytes: int | None = None) -> Iterator[tuple[list[int], list[ReadOut], int]]:
    """Run all queries; yield ``(indices, read-outs, tokens computed)`` batch by batch.

    With ``reuse_prefix`` (and a model that passed the KV-cache self-check) the
    rows run over their token radix tree, every unique token once
    (:func:`belieflens.run.trie_runner.run_trie`), its edges packed into rows of up
    to ``row_tokens`` tokens; otherwise as padded batches of
    whole prompts, sorted by length.

    ``skip``: queries whose read-outs are not wanted (saved by an interrupted run): they are
    not yielded, and batches of nothing else do not run. The batches that run are composed
    as in a run without ``skip``, so their read-outs are the same bit for bit.
    ``retain_bytes``: the most bytes the radix tree's retained key/value caches may hold
    (``None``: no limit); the read-outs are the same bit for bit under any limit.
    """
    if reuse_prefix and model.info.prefix_reuse:
        yield from run_trie(model, tqs, max_rows=max_rows, max_tokens=max_tokens,
                            row_tokens=row_tokens, save_logits=save_logits,
                            cont_resid=cont_resid, skip=skip, retain_bytes=retain_bytes)
        return
    for batch in plan_batches(tqs, max_rows=max_rows, max_tokens=max_tokens):
        if all(i in skip for i in batch):
            continue
        outs = run_batch(model, [tqs[i] for i in batch], save_logits=save_logits,
                         padding_side=padding_side, cont_resid=cont_resid)
        wanted = [k for k, i in enumerate(batch) if i not in skip]
        yield ([batch[k] for k in wanted], [outs[k] for k in wanted],
               sum(len(r.ids) for r in forward_rows([tqs[i] for i in batch])))
