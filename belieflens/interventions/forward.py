"""Forward passes that re-enter the residual stream at a layer: the engine of every intervention.

A **clean run** of a batch of read-outs caches the residual stream at every layer and every
position (layer 0 = the embeddings, the input of block 0; layer ``l`` = the output of block
``l-1``: the hook points of :func:`belieflens.run.rows.resid_hook_names`, as in the cache
file's ``resid``). An intervention at layer ``l`` edits that residual (at some positions) and
needs only blocks ``l .. L-1`` on top of it: :func:`run_from` feeds the edited residual to
the bridge as the input of block ``l`` (TransformerBridge's ``start_at_layer``) while blocks
``0 .. l-1`` are bypassed (:func:`bypass_blocks`: their forward returns its input), so they
cost nothing. At ``l = L`` no block runs; the final norm and the unembedding read the
residual. :func:`run_replaced` is the reference: one full forward in which a hook replaces
the layer-``l`` residual (what a patching loop without reuse runs).

:func:`run_edited`, what patching, steering and erasure run, goes further: the clean run
also keeps its key/value cache, and blocks ``l .. L-1`` run only on the positions from each
row's first edited one (:func:`edit_starts`; at most its answer position) on. The positions
before it are, at every layer, what the clean run computed (causal attention), so their keys
and values come from the clean cache (:func:`belieflens.model.kv_cache.prefix_cache`, read,
never written). An answer-position edit thus runs the answer position (and a multi-token
option's continuation) through blocks ``l .. L-1``, whatever the context's length.

Rows are those of the extraction runner (:func:`belieflens.run.rows.forward_rows`: one per
query with single-token options, else one per option), right-padded into one batch; the
unembedding runs only at the positions read (``logits_to_keep``). Option log-probabilities
are computed as in :func:`belieflens.run.runner.run_batch` (log-softmax over the
vocabulary, summed over a multi-token option's tokens).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.rows import Row, forward_rows, resid_hook_names

Tensor = Any
"""A ``torch.Tensor`` (torch is imported only when a model runs)."""


@dataclass(frozen=True)
class RowBatch:
    """Forward rows of some read-outs, right-padded to ``width`` tokens.

    ``rows[i].query`` indexes ``queries``; positions are the rows' own (right padding keeps
    every real token at its true position, and causal attention never sees the pads).
    """

    queries: tuple[TokenizedQuery, ...]
    rows: tuple[Row, ...]
    width: int

    @classmethod
    def of(cls, queries: Sequence[TokenizedQuery]) -> RowBatch:
        """The rows of ``queries`` in query order."""
        rows = tuple(forward_rows(queries))
        return cls(tuple(queries), rows, max(len(r.ids) for r in rows))

    def tile(self, k: int) -> RowBatch:
        """The batch repeated ``k`` times (queries and rows, block after block)."""
        return RowBatch.of(self.queries * k)

    @property
    def n_options(self) -> int:
        """The widest query's number of options."""
        return max(len(q.option_ids) for q in self.queries)

    def answer_positions(self) -> NDArray[np.int64]:
        """Each row's answer position (the last context token) ``[row]``."""
        return np.array([r.answer_pos for r in self.rows], dtype=np.int64)

    def lengths(self) -> NDArray[np.int64]:
        """Each row's token count ``[row]``."""
        return np.array([len(r.ids) for r in self.rows], dtype=np.int64)


def _device(model: LoadedModel) -> Any:
    return next(model.bridge.original_model.parameters()).device


def _ids(model: LoadedModel, batch: RowBatch) -> Tensor:
    import torch

    pad = getattr(model.tokenizer, "pad_token_id", None)
    ids = torch.full((len(batch.rows), batch.width), 0 if pad is None else int(pad),
                     dtype=torch.long)
    for b, r in enumerate(batch.rows):
        ids[b, : len(r.ids)] = torch.tensor(r.ids)
    return ids.to(_device(model))


def _read_plan(batch: RowBatch) -> tuple[list[int], list[int], list[int]]:
    """(row, position) of every read, and the sorted positions the unembedding keeps."""
    read_b: list[int] = []
    read_p: list[int] = []
    for b, r in enumerate(batch.rows):
        n = 1 if r.option is None else len(batch.queries[r.query].option_ids[r.option])
        for i in range(n):
            read_b.append(b)
            read_p.append(r.answer_pos + i)
    return read_b, read_p, sorted(set(read_p))


def _select(logits: Tensor, plan: tuple[list[int], list[int], list[int]]) -> Tensor:
    """The logits of every read, in the plan's order, from logits at the kept positions."""
    import torch

    read_b, read_p, keep = plan
    col = {p: i for i, p in enumerate(keep)}
    dev = logits.device
    return logits[torch.tensor(read_b, device=dev), torch.tensor([col[p] for p in read_p],
                                                                   device=dev)]


def _option_logprobs(sel: Tensor, batch: RowBatch) -> NDArray[np.float64]:
    """``[query, option]`` log P(option) from the logits of every read ``sel [read, vocab]``
    (the order of :func:`_read_plan`; NaN padding)."""
    import torch

    logp = torch.log_softmax(sel.float(), dim=-1).double().cpu()
    out = np.full((len(batch.queries), batch.n_options), np.nan)
    k = 0
    for r in batch.rows:
        tq = batch.queries[r.query]
        if r.option is None:
            targets = torch.tensor([c[0] for c in tq.option_ids])
            out[r.query, : len(tq.option_ids)] = logp[k, targets].numpy()
            k += 1
        else:
            cont = tq.option_ids[r.option]
            vals = logp[torch.arange(k, k + len(cont)), torch.tensor(cont)]
            out[r.query, r.option] = float(vals.sum())
            k += len(cont)
    return out


def _identity(*args: Any, **kwargs: Any) -> Any:
    return args[0] if args else kwargs["hidden_states"]


@contextlib.contextmanager
def bypass_blocks(model: LoadedModel, n: int, last: Tensor | None = None) -> Iterator[None]:
    """Inside the block, blocks ``0 .. n-1`` return their input unchanged (no compute), and
    block ``n-1`` returns ``last`` instead where it is given.

    ``last`` is how a residual reaches the final norm when no block runs (``n = L``): the
    model's own input of block ``L-1`` is the embedding of what it was fed, to which GPT-2
    adds its position embeddings (Llama adds nothing), and a bypassed block never swaps in
    ``start_at_layer``'s residual. The bypass is set on the bridge's block modules
    themselves (``object.__setattr__``: the bridge forwards ordinary attribute writes to the
    wrapped HF layer) and removed after.
    """
    blocks = [model.bridge.blocks[i] for i in range(n)]
    for i, blk in enumerate(blocks):
        object.__setattr__(blk, "forward", _identity if last is None or i < n - 1
                           else lambda *args, **kwargs: last)
    try:
        yield
    finally:
        for blk in blocks:
            object.__delattr__(blk, "forward")


@dataclass(frozen=True)
class CleanRun:
    """A clean run: residuals at every position of the layers asked for, the option
    log-probs, and the key/value cache that :func:`run_edited` reuses for each row's unedited
    prefix."""

    resid: Mapping[int, Tensor]
    """Per layer asked for (0 = embeddings), ``[row, position, d_model]`` on the model's
    device."""
    logprob: NDArray[np.float64]
    """``[query, option]`` log P(option) (NaN past a query's options)."""
    batch: RowBatch
    """The batch that ran."""
    cache: Any = None
    """The run's key/value cache (a ``DynamicCache``: every layer, every position), or
    ``None`` where the model's cache cannot be reused (the self-check at load failed, or a
    layer does not keep every position)."""


def clean_run(model: LoadedModel, batch: RowBatch, *, keep_cache: bool = True,
              layers: Collection[int] | None = None) -> CleanRun:
    """Run ``batch`` unedited, keeping the residual stream of ``layers`` (default: every
    layer, ``0 .. L``) at every position and (``keep_cache``, where the model allows it) the
    key/value cache."""
    import torch

    from belieflens.model.kv_cache import full_cache, keeps_every_position

    n_layers = model.info.n_layers
    captured: dict[int, Tensor] = {}

    def make_hook(layer: int) -> Any:
        def hook(tensor: Tensor, hook: Any) -> Tensor:
            captured[layer] = tensor.detach().clone()
            return tensor

        return hook

    wanted = range(n_layers + 1) if layers is None else sorted(set(layers))
    names = resid_hook_names(n_layers)
    hooks = [(names[i], make_hook(i)) for i in wanted]
    plan = _read_plan(batch)
    keep = keep_cache and model.info.prefix_reuse
    kwargs: dict[str, Any] = {}
    if keep:
        # a cache of plain layers keeps every position even where a layer slides (Gemma 3):
        # the window is the attention mask's, drawn from the positions, not the cache's
        kwargs = {"return_type": "logits_and_cache", "use_cache": True,
                  "past_key_values": full_cache()}
    with torch.inference_mode():
        out = model.bridge.run_with_hooks(
            _ids(model, batch), fwd_hooks=hooks,
            logits_to_keep=torch.tensor(plan[2], device=_device(model)), **kwargs,
        )
        logits, cache = out if keep else (out, None)
        resid = {i: captured[i] for i in wanted}
    if cache is not None and not keeps_every_position(cache):
        cache = None
    return CleanRun(resid=resid, logprob=_option_logprobs(_select(logits, plan), batch),
                    batch=batch, cache=cache)


def run_from(model: LoadedModel, batch: RowBatch, layer: int, resid: Tensor
             ) -> NDArray[np.float64]:
    """Option log-probs ``[query, option]`` of ``batch`` when the residual stream at ``layer``
    is ``resid [row, position, d_model]``: only blocks ``layer .. L-1`` run."""
    import torch

    n_layers = model.info.n_layers
    if not 0 <= layer <= n_layers:
        raise ValueError(f"layer {layer} is outside 0..{n_layers}")
    plan = _read_plan(batch)
    last = resid if layer == n_layers else None
    with torch.inference_mode(), bypass_blocks(model, layer, last):
        logits = model.bridge(
            resid, start_at_layer=min(layer, n_layers - 1),
            logits_to_keep=torch.tensor(plan[2], device=_device(model)),
        )
    return _option_logprobs(_select(logits, plan), batch)


def run_replaced(model: LoadedModel, batch: RowBatch, layer: int, resid: Tensor
                 ) -> NDArray[np.float64]:
    """The reference for :func:`run_from`: one full forward of ``batch`` in which a hook
    replaces the residual stream at ``layer`` by ``resid`` (every block runs)."""
    import torch

    name = resid_hook_names(model.info.n_layers)[layer]
    plan = _read_plan(batch)

    def hook(tensor: Tensor, hook: Any) -> Tensor:
        return resid.to(tensor.dtype)

    with torch.inference_mode():
        logits = model.bridge.run_with_hooks(
            _ids(model, batch), fwd_hooks=[(name, hook)],
            logits_to_keep=torch.tensor(plan[2], device=_device(model)),
        )
    return _option_logprobs(_select(logits, plan), batch)


def edit_starts(batch: RowBatch, layer: int, resid: Tensor, clean: CleanRun
                ) -> NDArray[np.int64]:
    """Each row's first position that must run again when the layer-``layer`` residual is
    ``resid``: its first real position where ``resid`` differs from the clean run's, or its
    answer position (read there) if that comes first ``[row]``. Every position before it
    is, at every layer, what the clean run computed (causal attention).

    ``batch`` is ``clean.batch`` tiled ``k`` times (:meth:`RowBatch.tile`); anything else
    raises ``ValueError``.
    """
    import torch

    base = clean.batch
    n = len(base.rows)
    if len(batch.rows) % n or batch.width != base.width or any(
            (r.ids, r.answer_pos) != (base.rows[i % n].ids, base.rows[i % n].answer_pos)
            for i, r in enumerate(batch.rows)):
        raise ValueError("the batch is not the clean run's batch, tiled")
    ref = clean.resid[layer]
    changed = (resid.reshape(-1, *ref.shape) != ref[None]).any(-1).reshape(len(batch.rows), -1)
    changed &= (torch.arange(batch.width, device=ref.device)[None, :]
                < torch.as_tensor(batch.lengths(), device=ref.device)[:, None])
    first = torch.where(changed.any(1), changed.int().argmax(1), batch.width).cpu().numpy()
    out: NDArray[np.int64] = np.minimum(first, batch.answer_positions()).astype(np.int64)
    return out


def run_edited(model: LoadedModel, batch: RowBatch, layer: int, resid: Tensor,
               clean: CleanRun) -> NDArray[np.float64]:
    """Option log-probs ``[query, option]`` of ``batch`` (``clean.batch`` tiled) when the
    residual stream at ``layer`` is ``resid [row, position, d_model]``, reusing the clean
    run's keys and values for each row's unedited prefix: blocks ``layer .. L-1`` run only
    on the positions from each row's :func:`edit_starts` on (an answer-position edit: the
    answer position and a multi-token option's continuation), rows of one start in one
    forward. The same numbers as :func:`run_from` and :func:`run_replaced`; without a
    cache (``clean.cache is None``) it is :func:`run_from`."""
    import torch

    n_layers = model.info.n_layers
    if not 0 <= layer <= n_layers:
        raise ValueError(f"layer {layer} is outside 0..{n_layers}")
    if clean.cache is None:
        return run_from(model, batch, layer, resid)
    starts = edit_starts(batch, layer, resid, clean)
    read_b, read_p, _ = _read_plan(batch)
    lengths = batch.lengths()
    n = len(clean.batch.rows)
    picked: list[tuple[list[int], Tensor]] = []
    for start in (int(s) for s in np.unique(starts)):
        rows = np.flatnonzero(starts == start)
        local = {int(b): i for i, b in enumerate(rows)}
        reads = [i for i, b in enumerate(read_b) if starts[b] == start]
        plan = ([local[read_b[i]] for i in reads], [read_p[i] - start for i in reads],
                sorted({read_p[i] - start for i in reads}))
        src = None if len(rows) == n and (rows == np.arange(n)).all() else torch.as_tensor(
            rows % n, device=resid.device)
        suffix = resid[torch.as_tensor(rows, device=resid.device),
                       start : int(lengths[rows].max())]
        logits = _run_suffix(model, layer, suffix, clean.cache, start, src, plan[2])
        picked.append((reads, _select(logits, plan)))
    sel = torch.empty((len(read_b), picked[0][1].shape[-1]), dtype=picked[0][1].dtype,
                      device=picked[0][1].device)
    for reads, got in picked:
        sel[torch.as_tensor(reads, device=sel.device)] = got
    return _option_logprobs(sel, batch)


def _run_suffix(model: LoadedModel, layer: int, suffix: Tensor, cache: Any, start: int,
                rows: Tensor | None, keep: list[int], *, grad: bool = False) -> Tensor:
    """Logits at the ``keep`` positions of ``suffix`` (the layer-``layer`` residual of
    positions ``start ..``), the first ``start`` positions read from ``cache`` (its rows
    ``rows``; ``None``: all, in order); blocks ``0 .. layer-1`` are bypassed. ``grad``: keep
    the autograd graph from ``suffix`` (no ``inference_mode``)."""
    import torch

    from belieflens.model.kv_cache import prefix_cache

    n_layers = model.info.n_layers
    kwargs: dict[str, Any] = {}
    if start > 0 and layer < n_layers:  # at layer L no block attends to the past
        kwargs["past_key_values"] = prefix_cache(cache, start, rows)
    last = suffix if layer == n_layers else None
    with torch.inference_mode(not grad), bypass_blocks(model, layer, last), \
            warnings.catch_warnings():
        # transformers 5 renames GPT-2's `past_key_values`; the bridge still passes that name
        warnings.filterwarnings("ignore", message="`past_key_values` is deprecated")
        logits: Tensor = model.bridge(
            suffix, start_at_layer=min(layer, n_layers - 1),
            logits_to_keep=torch.tensor(keep, device=suffix.device), **kwargs)
    return logits


def at_answer(resid: Tensor, batch: RowBatch) -> Tensor:
    """The residual ``[row, position, d_model]`` at each row's answer position: ``[row, d]``."""
    import torch

    pos = torch.tensor(batch.answer_positions(), device=resid.device)
    return resid[torch.arange(resid.shape[0], device=resid.device), pos]


def with_answer(resid: Tensor, batch: RowBatch, values: Tensor) -> Tensor:
    """A copy of ``resid [row, position, d_model]`` with each row's answer position set to
    ``values [row, d_model]``."""
    import torch

    out = resid.clone()
    pos = torch.tensor(batch.answer_positions(), device=resid.device)
    out[torch.arange(resid.shape[0], device=resid.device), pos] = values.to(resid.dtype)
    return out


def option_logprobs_from(model: LoadedModel, batch: RowBatch, layer: int, resid: Tensor
                         ) -> Tensor:
    """:func:`run_from` kept differentiable: the option log-probs ``[query, option]`` of
    ``batch`` (a torch tensor, ``-inf`` past a query's options) when the residual stream at
    ``layer`` is ``resid [row, position, d_model]``, with the autograd graph from ``resid``
    (the caller freezes the model's weights; no ``inference_mode``)."""
    import torch

    n_layers = model.info.n_layers
    if not 0 <= layer <= n_layers:
        raise ValueError(f"layer {layer} is outside 0..{n_layers}")
    plan = _read_plan(batch)
    last = resid if layer == n_layers else None
    with bypass_blocks(model, layer, last):
        logits = model.bridge(
            resid, start_at_layer=min(layer, n_layers - 1),
            logits_to_keep=torch.tensor(plan[2], device=_device(model)),
        )
    logp = torch.log_softmax(_select(logits, plan).float(), dim=-1)
    out = torch.full((len(batch.queries), batch.n_options), float("-inf"),
                     device=logp.device)
    k = 0
    for r in batch.rows:
        tq = batch.queries[r.query]
        if r.option is None:
            targets = torch.tensor([c[0] for c in tq.option_ids], device=logp.device)
            out[r.query, : len(tq.option_ids)] = logp[k, targets]
            k += 1
        else:
            cont = tq.option_ids[r.option]
            at = torch.arange(k, k + len(cont), device=logp.device)
            out[r.query, r.option] = logp[at, torch.tensor(cont, device=logp.device)].sum()
            k += len(cont)
    return out


def answer_logprobs(model: LoadedModel, batch: RowBatch, layer: int, answer: Tensor,
                    cache: Any, cache_rows: Tensor) -> Tensor:
    """:func:`option_logprobs_from` for an edit of the answer position alone, through the
    clean cache: the option log-probs ``[query, option]`` (a torch tensor, ``-inf`` past a
    query's options, the autograd graph from ``answer``) of ``batch`` (one row per query:
    single-token options) when each row's layer-``layer`` residual at its answer position is
    ``answer [row, d_model]`` and every position before it is the clean run's, whose keys and
    values are row ``cache_rows[row]`` of ``cache``. Only the answer positions run through
    blocks ``layer .. L-1``, rows of one answer position in one forward."""
    import torch

    if len(batch.rows) != len(batch.queries):
        raise ValueError("an answer edit through the cache reads single-token options")
    starts = batch.answer_positions()
    out = torch.full((len(batch.queries), batch.n_options), float("-inf"),
                     device=answer.device)
    for start in (int(x) for x in np.unique(starts)):
        rows = np.flatnonzero(starts == start)
        at = torch.as_tensor(rows, device=answer.device)
        logits = _run_suffix(model, layer, answer[at][:, None, :], cache, start,
                             cache_rows[at], [0], grad=True)
        logp = torch.log_softmax(logits[:, -1].float(), dim=-1)
        for k, r in enumerate(rows):
            ids = [c[0] for c in batch.queries[int(r)].option_ids]
            out[int(r), : len(ids)] = logp[k, torch.tensor(ids, device=logp.device)]
    return out
