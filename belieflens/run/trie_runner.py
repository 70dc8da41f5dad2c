"""Run a study's forward rows over their token radix tree: every unique token once, in batches.

The tree's edges (:mod:`belieflens.run.trie`) are packed into rows
(:func:`belieflens.run.trie.pack`): a row holds edges that descend from one
parent edge, laid out one after another, and a tree mask lets each token see
exactly its own prefix (the parent's cache, its ancestors' tokens in the row, its
own edge's earlier tokens) with its true position id. Rows whose parents already
ran are batched into one forward call; their parents' caches, of different
lengths, are left-padded into one batched cache. After the call, the cache of
every edge with children in a later row is cut out of the batch (its whole
prefix) and kept until those children ran. With ``row_tokens`` 0 each edge is a
row of its own and the mask is the plain causal one.

Hooks copy the residual stream only at read positions; the final norm's output
is kept there too and unembedded (rows read different columns, so the model's
own unembedding runs on one position only). The hooks are attached once per run,
not once per forward call; attention runs through PyTorch SDPA where the bridge's
attention is plain (:mod:`belieflens.model.attention`), and rows are packed only
when every block's attention is; the bridge's norms run their HF module alone, without
the step-by-step recomputation the bridge does for its scale and normalized-value hooks
(:mod:`belieflens.model.norms`); each call's cache is allocated once, past and
new positions, and the forward writes its keys in place (no concatenation).
A query's :class:`~belieflens.run.rows.ReadOut` is yielded as soon
as the last of its read positions is computed. Equality with the full-prompt run
(within 1e-4 in fp32) is tested in ``tests/run/test_trie_runner.py``.
"""

from __future__ import annotations

import contextlib
import functools
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from belieflens.errors import BeliefLensError
from belieflens.model.attention import AttentionName, fast_modules, sdpa_attention
from belieflens.model.load import LoadedModel
from belieflens.model.norms import native_modules, native_norms
from belieflens.model.unembed import final_logits
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.rows import ReadOut, forward_rows, pad_token_id, resid_hook_names
from belieflens.run.trie import Row, Trie, build, pack, schedule_rows

Key = tuple[int, int]  # (edge, offset in the edge)


@dataclass
class _Need:
    """What is read at one position of the tree."""

    resid: bool = False
    full: bool = False
    targets: set[int] = field(default_factory=set)
    queries: set[int] = field(default_factory=set)


@dataclass
class _Got:
    lse: float
    lp: dict[int, float]
    resid: np.ndarray | None
    full: np.ndarray | None


@dataclass(frozen=True)
class _Plan:
    trie: Trie
    needs: dict[Key, _Need]
    answer: list[Key]  # per query
    option_keys: list[list[list[Key]]]  # per query, per option: the keys of its tokens
    cont_keys: list[list[list[Key]]]  # per query, per option: cont_resid keys

    def keys_of(self, q: int) -> set[Key]:
        """Every position query ``q`` reads."""
        return {self.answer[q], *(k for ks in self.option_keys[q] for k in ks),
                *(k for ks in self.cont_keys[q] for k in ks)}

    def reads_by_edge(self) -> dict[int, list[int]]:
        """The offsets read in each edge that has any."""
        reads: dict[int, list[int]] = {}
        for edge_at, off in self.needs:
            reads.setdefault(edge_at, []).append(off)
        return reads


def _plan(tqs: Sequence[TokenizedQuery], *, save_logits: bool, cont_resid: bool) -> _Plan:
    rows = forward_rows(tqs)
    trie = build([r.ids for r in rows])
    needs: dict[Key, _Need] = {}
    answer: list[Key | None] = [None] * len(tqs)
    option_keys: list[list[list[Key]]] = [[[] for _ in tq.option_ids] for tq in tqs]
    cont_keys: list[list[list[Key]]] = [[[] for _ in tq.option_ids] for tq in tqs]

    def need(key: Key, q: int) -> _Need:
        n = needs.setdefault(key, _Need())
        n.queries.add(q)
        return n

    for ri, r in enumerate(rows):
        tq = tqs[r.query]
        key = trie.locate(ri, r.answer_pos)
        if answer[r.query] is None:
            answer[r.query] = key
            n = need(key, r.query)
            n.resid = True
            n.full = save_logits
        if r.option is None:
            need(key, r.query).targets.update(c[0] for c in tq.option_ids)
            for j in range(len(tq.option_ids)):
                option_keys[r.query][j] = [key]
            continue
        cont = tq.option_ids[r.option]
        for i, tok in enumerate(cont):
            k = trie.locate(ri, r.answer_pos + i)
            need(k, r.query).targets.add(tok)
            option_keys[r.query][r.option].append(k)
        if cont_resid:
            for i in range(len(cont) - 1):
                k = trie.locate(ri, r.answer_pos + 1 + i)
                need(k, r.query).resid = True
                cont_keys[r.query][r.option].append(k)
    return _Plan(trie, needs, [a for a in answer if a is not None], option_keys, cont_keys)


def _readout(plan: _Plan, tqs: Sequence[TokenizedQuery], q: int, got: dict[Key, _Got]) -> ReadOut:
    tq = tqs[q]
    a = got[plan.answer[q]]
    assert a.resid is not None
    lp = np.zeros(len(tq.option_ids), dtype=np.float64)
    for j, keys in enumerate(plan.option_keys[q]):
        toks = (tq.option_ids[j][0],) if tq.single_token else tq.option_ids[j]
        lp[j] = sum(got[k].lp[t] for k, t in zip(keys, toks, strict=True))
    conts: np.ndarray | None = None
    if any(plan.cont_keys[q]):
        n_extra = max(len(c) for c in tq.option_ids) - 1
        conts = np.full((len(tq.option_ids), n_extra, *a.resid.shape), np.nan, dtype=np.float32)
        for j, keys in enumerate(plan.cont_keys[q]):
            for i, k in enumerate(keys):
                conts[j, i] = got[k].resid
    return ReadOut(resid=a.resid, option_logprob=lp, answer_lse=a.lse, logprobs=a.full,
                   cont_resid=conts)


@functools.cache
def _prealloc_layer() -> type:
    """A ``DynamicLayer`` that writes new keys and values into a preallocated buffer.

    ``DynamicLayer.update`` concatenates: every forward copies the whole past once
    per layer (and building a cache from tensors copies it once more). This layer is
    handed its buffer, past included, sized for the call's new tokens too, and
    writes them in place; without a buffer (no past) it keeps the new tensors as
    they are.
    """
    import torch
    from transformers.cache_utils import DynamicLayer

    base: Any = DynamicLayer

    class PreallocLayer(base):  # type: ignore[misc]
        def __init__(self, keys: Any = None, values: Any = None, filled: int = 0) -> None:
            super().__init__()
            self._buf_k, self._buf_v, self._n = keys, values, filled
            if keys is not None:
                self.keys, self.values = keys[..., :filled, :], values[..., :filled, :]
                self.device = keys.device
                self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any,
                   **kwargs: Any) -> tuple[Any, Any]:
            n = self._n + key_states.shape[-2]
            if self._buf_k is None and self._n == 0:
                self.keys, self.values = key_states, value_states
                self.device, self.is_initialized = key_states.device, True
            elif self._buf_k is not None and n <= self._buf_k.shape[-2]:
                self._buf_k[..., self._n : n, :] = key_states
                self._buf_v[..., self._n : n, :] = value_states
                self.keys, self.values = self._buf_k[..., :n, :], self._buf_v[..., :n, :]
            else:  # pragma: no cover - a second call on one cache; extraction makes one
                self.keys = torch.cat([self.keys, key_states], dim=-2)
                self.values = torch.cat([self.values, value_states], dim=-2)
            self._n = n
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self._n

    return PreallocLayer


def _empty_cache(n_layers: int, prealloc: bool) -> Any:
    """A cache for a call without past (root edges whose children need their keys)."""
    from belieflens.model.kv_cache import full_cache

    cache = full_cache()
    if prealloc:
        cache.layers = [_prealloc_layer()() for _ in range(n_layers)]
    return cache


Segment = list[tuple[Any, Any]]
"""One edge's own keys and values: per layer ``(keys, values)``, each ``[kv heads, tokens,
d_head]``. An edge's whole prefix is its ancestors' segments and its own, root first."""


def _padded_past(
    kv: list[list[Segment] | None], width: int, new: int = 0, *, prealloc: bool = True
) -> Any:
    """One cache holding each row's past (its segments, root first), left-padded with zeros to
    ``width``.

    With ``prealloc`` the buffers have room for ``new`` more positions, which the
    forward writes in place (:func:`_prealloc_layer`); otherwise a ``DynamicCache``
    of the past alone (the forward concatenates).
    """
    import torch
    from transformers import DynamicCache

    some = next(x for x in kv if x is not None)[0]
    size = width + (new if prealloc else 0)
    # each row's past is right-aligned; only the padding left of it needs zeros (masked, but
    # it must be finite); the `new` positions are written by the forward before any read
    lengths = [0 if x is None else sum(int(seg[0][0].shape[1]) for seg in x) for x in kv]
    layers = []
    for layer, (k0, v0) in enumerate(some):
        k = torch.empty((len(kv), k0.shape[0], size, k0.shape[2]), dtype=k0.dtype,
                        device=k0.device)
        v = torch.empty((len(kv), v0.shape[0], size, v0.shape[2]), dtype=v0.dtype,
                        device=v0.device)
        for b, x in enumerate(kv):
            at = width - lengths[b]
            if at:
                k[b, :, :at].zero_()
                v[b, :, :at].zero_()
            for seg in x or ():
                kb, vb = seg[layer]
                n = int(kb.shape[1])
                k[b, :, at : at + n] = kb
                v[b, :, at : at + n] = vb
                at += n
        layers.append((k, v))
    if not prealloc:
        return DynamicCache(ddp_cache_data=layers)
    cache = DynamicCache()
    cache.layers = [_prealloc_layer()(k, v, width) for k, v in layers]
    return cache


@dataclass
class _At:
    """Where the capture hooks read: batch rows and positions (set before each call).

    ``rows``/``pos`` are the residual read positions, ``lrows``/``lpos`` the positions
    whose logits are read (the final norm's output there is kept and unembedded).
    ``active`` is true only during this runner's own forward calls: the hooks stay
    attached while the runner yields, and another forward in between (a caller's)
    must not be read.
    """

    rows: Any = None
    pos: Any = None
    lrows: Any = None
    lpos: Any = None
    active: bool = False


FINAL = -1
"""Key of the final norm's output in the captured dict."""

FINAL_HOOK = "ln_final.hook_out"
"""The hook whose output the unembedding reads (the final norm)."""


def _capture_hooks(names: list[str], at: _At, into: dict[int, Any]) -> list[Any]:
    """Hooks copying the residual at ``(at.rows, at.pos)`` of each named layer into ``into``,
    and the final norm's output at ``(at.lrows, at.lpos)`` into ``into[FINAL]``."""

    def make(layer: int) -> Any:
        def hook(tensor: Any, hook: Any) -> Any:
            if at.active:
                into[layer] = tensor[at.rows, at.pos].detach().float().cpu()
            return tensor

        return hook

    def final(tensor: Any, hook: Any) -> Any:
        if at.active:
            into[FINAL] = tensor[at.lrows, at.lpos].detach()
        return tensor

    return [(name, make(i)) for i, name in enumerate(names)] + [(FINAL_HOOK, final)]


def _ancestry(trie: Trie, row: Row) -> Any:
    """``a[k, m]``: the row's edge ``m`` is edge ``k`` or one of its ancestors."""
    import torch

    at = {e: k for k, e in enumerate(row.edges)}
    a = torch.eye(len(row.edges), dtype=torch.bool)
    for k, e in enumerate(row.edges):
        parent = at.get(trie.edges[e].parent)
        if parent is not None:  # else a top-level edge: the row's past is its prefix
            a[k] |= a[parent]
    return a


def _tree_mask(trie: Trie, rows: list[Row], past: int, width: int, dtype: Any) -> Any:
    """Additive mask ``(rows, 1, width, past + width)``: each token sees its own prefix only.

    A row's tokens see its root's past (right-aligned in the padded past), the
    tokens of their edge's ancestors in the row and their own edge's earlier tokens;
    padding sees itself.
    """
    import torch

    allowed = torch.zeros((len(rows), width, past + width), dtype=torch.bool)
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    for b, row in enumerate(rows):
        start = trie.edges[row.root].start
        allowed[b, :, past - start : past] = True
        which = torch.tensor([k for k, e in enumerate(row.edges)
                              for _ in trie.edges[e].tokens])
        n = row.length
        allowed[b, :n, past : past + n] = _ancestry(trie, row)[which][:, which] & causal[:n, :n]
        pad = torch.arange(n, width)
        allowed[b, pad, past + pad] = True
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[:, None]


def _kept(trie: Trie, row: Row) -> list[int]:
    """Edges of ``row`` whose cache a later call needs (a child outside the row)."""
    inside = set(row.edges)
    return [e for e in row.edges if any(c not in inside for c in trie.edges[e].children)]


def _call_inputs(
    trie: Trie, rows: list[Row], kv: Callable[[int], list[Segment]], pad: int, device: Any,
    *, n_layers: int, dtype: Any, prealloc: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """Input ids (right-padded) and forward kwargs (past, positions, mask) for a call of rows.

    Rows of one edge each get the plain causal layout (a padding mask where the
    pasts differ); rows of several edges get a tree mask (:func:`_tree_mask`). ``kv`` gives
    the segments of an edge's whole prefix.
    """
    import torch

    roots = [trie.edges[r.root] for r in rows]
    past = max(e.start for e in roots)
    width = max(r.length for r in rows)
    packed = any(len(r.edges) > 1 for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, : r.length] = torch.tensor([t for e in r.edges for t in trie.edges[e].tokens])
        pos = [trie.edges[e].start + j for e in r.edges for j in range(len(trie.edges[e].tokens))]
        positions[b, : r.length] = torch.tensor(pos)
        positions[b, r.length :] = pos[-1] + 1 + torch.arange(width - r.length)
    keeps_cache = any(_kept(trie, r) for r in rows)
    kwargs: dict[str, Any] = {"use_cache": keeps_cache}
    if past > 0:
        kwargs["past_key_values"] = _padded_past(
            [kv(e.parent) if e.parent >= 0 else None for e in roots], past, width,
            prealloc=prealloc)
    elif keeps_cache:
        kwargs["past_key_values"] = _empty_cache(n_layers, prealloc)
    if past > 0 or packed:
        kwargs["position_ids"] = positions.to(device)
    if packed:
        kwargs["attention_mask"] = _tree_mask(trie, rows, past, width, dtype).to(device)
    elif any(e.start < past for e in roots):
        mask = torch.zeros((len(rows), past + width), dtype=torch.long)
        for b, (r, e) in enumerate(zip(rows, roots, strict=True)):
            mask[b, past - e.start : past + r.length] = 1
        kwargs["attention_mask"] = mask.to(device)
    return ids.to(device), kwargs


def _segments(
    trie: Trie, cache: Any, rows: list[Row], width: int, want: Collection[int]
) -> dict[int, Segment]:
    """The segment of each edge of ``rows`` in ``want``, cut out of the call's cache (copies,
    so that the call's buffers are freed)."""
    import torch

    past = max(trie.edges[r.root].start for r in rows)
    out: dict[int, Segment] = {}
    for b, r in enumerate(rows):
        for e, col in zip(r.edges, r.cols, strict=True):
            if e not in want:
                continue
            at = torch.arange(past + col, past + col + len(trie.edges[e].tokens))
            layers = []
            for layer in cache.layers:
                if layer.keys.shape[-2] != past + width:
                    raise BeliefLensError(
                        "this model's KV cache does not keep every position (sliding "
                        "window?); run with --no-prefix-reuse"
                    )
                keys, values = layer.keys[b], layer.values[b]
                at = at.to(keys.device)
                layers.append((keys.index_select(1, at), values.index_select(1, at)))
            out[e] = layers
    return out


ROW_TOKENS = 128
"""Tokens per row when edges are packed under a tree mask (:func:`belieflens.run.trie.pack`)."""


def _packable(bridge: Any) -> bool:
    """Whether every block's attention honours a tree mask exactly (plain rotary, full cache)."""
    plain = {id(m) for m in fast_modules(bridge)}
    blocks = list(getattr(bridge, "blocks", []))
    return bool(blocks) and all(id(getattr(b, "attn", None)) in plain for b in blocks)


def run_trie(model: LoadedModel, tqs: Sequence[TokenizedQuery], *, max_rows: int, max_tokens: int,
             save_logits: bool = False, cont_resid: bool = False, attention: AttentionName = "sdpa",
             prealloc: bool = True, hooks_once: bool = True, row_tokens: int = ROW_TOKENS,
             norms: bool = True, skip: Collection[int] = (), retain_bytes: int | None = None,
             stats: CacheStats | None = None) -> Iterator[tuple[list[int], list[ReadOut], int]]:
    """Run all queries over their radix tree; yield ``(indices, read-outs, tokens computed)``.

    Needs a model whose KV cache passed the self-check at load (``model.info.prefix_reuse``)
    and keeps every position; a cache of another layout raises :class:`BeliefLensError`.

    ``attention``: SDPA where the bridge's attention allows it
    (:mod:`belieflens.model.attention`) or the bridge's eager steps.
    ``prealloc``: each call's cache is allocated once, new keys written in place
    (else ``DynamicCache`` concatenates). ``hooks_once``: the capture hooks are
    attached once per call of this function, not once per forward call.
    ``row_tokens``: edges are packed into rows of up to this many tokens under a
    tree mask (:func:`belieflens.run.trie.pack`), for plain rotary attention
    (:mod:`belieflens.model.attention`) only; 0 runs every edge in a row of its own.
    ``norms``: the bridge's norms run their HF module alone, without the bridge's
    step-by-step recomputation for hooks nobody attached (:mod:`belieflens.model.norms`).
    The last five switch each step toward the compute floor off, so that the plain path
    can be timed against it; the results agree within 1e-4 either way (tested).

    ``skip``: queries saved by an interrupted run. Only the calls that read another query's
    position run, with those computing their past (:func:`needed_calls`), each as in the
    whole run, so what they compute is the same bit for bit.

    ``retain_bytes``: the most bytes the key/value caches kept for later calls may hold
    (``None``: no limit). Each edge's own keys and values are kept once, shared by its
    descendants; over the limit the one used furthest ahead is evicted and computed again when
    needed, by the same call as before, so the read-outs are the same bit for bit (:class:`_Store`).
    ``stats``: filled with the retained bytes' peak and the recomputation (:class:`CacheStats`).
    """
    if not tqs:
        return
    plan = _plan(tqs, save_logits=save_logits, cont_resid=cont_resid)
    trie = plan.trie
    bridge = model.bridge
    device = next(bridge.original_model.parameters()).device
    pad = pad_token_id(model.tokenizer)
    names = resid_hook_names(model.info.n_layers)
    live = set(range(len(tqs))).difference(skip)
    book = _Book(plan, tqs, live)
    fwd = _Forward(
        model, names, attention=attention, hooks_once=hooks_once,
        fast=fast_modules(bridge) if attention == "sdpa" else [],
        plain_norms=native_modules(bridge) if norms else [],
    )
    if not _packable(bridge):
        row_tokens = 0
    rows = pack(trie, row_tokens)
    calls = schedule_rows(trie, rows, max_rows=max_rows, max_tokens=max_tokens)
    if len(live) < len(tqs):
        calls = needed_calls(plan, rows, calls, live)
    store = _Store(trie, [[rows[r] for r in call] for call in calls], retain_bytes,
                   stats if stats is not None else CacheStats())
    dtype = next(bridge.original_model.parameters()).dtype
    run = _Calls(plan, rows, calls, fwd, store, book, pad=pad, device=device, dtype=dtype,
                 prealloc=prealloc)
    with contextlib.ExitStack() as stack:
        if hooks_once:  # one registration for every forward call below
            stack.enter_context(bridge.hooks(fwd_hooks=fwd.hooks()))
        for c in range(len(calls)):
            keys = run(c, True)
            store.ran(c)
            done, outs = book.finished(keys)
            yield done, outs, sum(rows[r].length for r in calls[c])


class _Calls:
    """The forward calls of :func:`run_trie`, each run with its past made whole first."""

    def __init__(self, plan: _Plan, rows: Sequence[Row], calls: Sequence[list[int]],
                 fwd: _Forward, store: _Store, book: _Book, *, pad: int, device: Any,
                 dtype: Any, prealloc: bool) -> None:
        self.plan, self.rows, self.calls = plan, rows, calls
        self.fwd, self.store, self.book = fwd, store, book
        self.pad, self.device, self.dtype, self.prealloc = pad, device, dtype, prealloc
        self.reads = plan.reads_by_edge()

    def __call__(self, c: int, read: bool) -> list[tuple[int, Key, int]]:
        """Run call ``c``; with ``read``, record its read positions (returned) in the book,
        else (a call computed again for an evicted segment) only keep its segments."""
        trie, store, fwd = self.plan.trie, self.store, self.fwd
        crows = [self.rows[r] for r in self.calls[c]]
        store.ensure(c, self)
        ids, kwargs = _call_inputs(trie, crows, store.prefix, self.pad, self.device,
                                   n_layers=len(fwd.names) - 1, dtype=self.dtype,
                                   prealloc=self.prealloc)
        store.unpin(c)
        # (row, (edge, offset), column) of every read position of the call
        keys = [(b, (e, off), col + off) for b, r in enumerate(crows)
                for e, col in zip(r.edges, r.cols, strict=True)
                for off in self.reads.get(e, [])] if read else []
        r_keys = [(b, k, p) for b, k, p in keys if self.plan.needs[k].resid]
        fwd.point(r_keys, keys, self.device)
        logits = fwd(ids, kwargs, unembed=bool(keys))
        if read:
            self.book.record(keys, r_keys, logits, fwd.resid() if r_keys else None)
        if kwargs["use_cache"]:
            store.keep(_segments(trie, kwargs["past_key_values"], crows, ids.shape[1],
                                 store.wanted(crows)))
        return keys


def needed_calls(plan: _Plan, rows: Sequence[Row], calls: Sequence[list[int]],
                 live: set[int]) -> list[list[int]]:
    """The ``calls`` (of ``rows``) that read a position of a query in ``live``, and those that
    compute their rows' past, in schedule order."""
    trie = plan.trie
    row_of = {e: r for r, row in enumerate(rows) for e in row.edges}
    call_of = {r: c for c, call in enumerate(calls) for r in call}
    need = {call_of[row_of[edge]] for q in live for edge, _ in plan.keys_of(q)}
    for c in range(len(calls) - 1, -1, -1):  # a row's past is computed by an earlier call
        if c in need:
            for r in calls[c]:
                parent = trie.edges[rows[r].root].parent
                if parent >= 0:
                    need.add(call_of[row_of[parent]])
    return [call for c, call in enumerate(calls) if c in need]


class _Forward:
    """One forward call of :func:`run_trie`: hooks, attention and norm paths, unembedding."""

    def __init__(
        self, model: LoadedModel, names: list[str], *, attention: AttentionName,
        hooks_once: bool, fast: list[Any], plain_norms: list[Any],
    ) -> None:
        self.model, self.names = model, names
        self.attention, self.hooks_once = attention, hooks_once
        self.fast, self.plain_norms = fast, plain_norms
        self.at = _At()
        self.captured: dict[int, Any] = {}

    def hooks(self) -> list[Any]:
        """The capture hooks (:func:`_capture_hooks`) writing into this call's ``captured``."""
        return _capture_hooks(self.names, self.at, self.captured)

    def point(self, r_keys: list[tuple[int, Key, int]], keys: list[tuple[int, Key, int]],
              device: Any) -> None:
        """Set where the hooks read: residuals at ``r_keys``, final-norm outputs at ``keys``."""
        import torch

        at = self.at
        at.rows = torch.tensor([b for b, _, _ in r_keys], dtype=torch.long, device=device)
        at.pos = torch.tensor([p for _, _, p in r_keys], dtype=torch.long, device=device)
        at.lrows = torch.tensor([b for b, _, _ in keys], dtype=torch.long, device=device)
        at.lpos = torch.tensor([p for _, _, p in keys], dtype=torch.long, device=device)

    def __call__(self, ids: Any, kwargs: dict[str, Any], *, unembed: bool) -> tuple[Any, Any]:
        """Run the call; with ``unembed``, log-probs and log-sum-exp at the read positions."""
        import torch

        bridge, at = self.model.bridge, self.at
        self.captured.clear()
        kwargs["logits_to_keep"] = 1
        logp = lse = None
        with (torch.inference_mode(), sdpa_attention(bridge, self.attention, modules=self.fast),
              native_norms(bridge, modules=self.plain_norms)):
            at.active = True
            try:
                if self.hooks_once:
                    bridge(ids, **kwargs)
                else:
                    bridge.run_with_hooks(ids, fwd_hooks=self.hooks(), **kwargs)
            finally:
                at.active = False
            if unembed:
                sel = final_logits(self.model.bridge.original_model, self.captured[FINAL])
                logp = torch.log_softmax(sel, dim=-1).cpu()
                lse = torch.logsumexp(sel, dim=-1).cpu()
        return logp, lse

    def resid(self) -> np.ndarray:
        """The residuals read by the last call, ``[read position, layer, d_model]``."""
        import torch

        return torch.stack([self.captured[i] for i in range(len(self.names))], dim=1).numpy()


class CacheStats:
    """What :func:`run_trie`'s retained key/value caches held and cost (for tests and benches).

    Attributes:
        peak_bytes: the most bytes of retained segments after any call (evictions done).
        recomputed_calls: forward calls run again to recompute evicted segments.
        recomputed_tokens: tokens of those calls.
    """

    def __init__(self) -> None:
        self.peak_bytes = 0
        self.recomputed_calls = 0
        self.recomputed_tokens = 0


class _Store:
    """The segments of the radix tree's edges that later calls read, in at most ``limit`` bytes.

    An edge's segment is kept while a later call's past holds it. Over ``limit`` the segment
    whose next use is furthest is evicted (Belady's rule; ancestors, used no later than their
    descendants, go last); a call whose past lost a segment first runs the call that made it
    again, exactly as it ran (same rows, same batch), so the segment is the same bit for bit.
    The segments of the call about to run are pinned until its past is built.
    """

    def __init__(self, trie: Trie, calls: Sequence[Sequence[Row]], limit: int | None,
                 stats: CacheStats) -> None:
        self.trie, self.calls, self.limit, self.stats = trie, calls, limit, stats
        self.seg: dict[int, Segment] = {}
        self.size: dict[int, int] = {}
        self.bytes, self.now = 0, 0
        self.pins: dict[int, int] = {}
        self.uses: dict[int, deque[int]] = {}  # edge -> calls whose past holds it, ascending
        self.made_by: dict[int, int] = {}  # edge -> the call that computes it
        for c, rows in enumerate(calls):
            for r in rows:
                for e in r.edges:
                    self.made_by[e] = c
            for e in self.past_edges(c):
                self.uses.setdefault(e, deque()).append(c)

    def past_edges(self, c: int) -> list[int]:
        """Every edge the past of call ``c``'s rows holds, each once, ancestors first."""
        out: list[int] = []
        seen: set[int] = set()
        for r in self.calls[c]:
            chain = []
            p = self.trie.edges[r.root].parent
            while p >= 0 and p not in seen:
                seen.add(p)
                chain.append(p)
                p = self.trie.edges[p].parent
            out.extend(reversed(chain))
        return out

    def next_use(self, e: int) -> float:
        """The first call from now on whose past holds ``e`` (infinity: none)."""
        q = self.uses.get(e)
        while q and q[0] < self.now:
            q.popleft()
        return q[0] if q else float("inf")

    def prefix(self, e: int) -> list[Segment]:
        """The segments of ``e``'s whole prefix, root first."""
        chain = []
        while e >= 0:
            chain.append(self.seg[e])
            e = self.trie.edges[e].parent
        return chain[::-1]

    def ensure(self, c: int, run: Callable[[int, bool], object]) -> None:
        """Pin call ``c``'s past, computing again (``run``) the segments evicted from it."""
        edges = self.past_edges(c)
        for e in edges:
            self.pins[e] = self.pins.get(e, 0) + 1
        for e in edges:  # ancestors first: a rerun computes an edge against its parents
            if e not in self.seg:
                made = self.made_by[e]
                self.stats.recomputed_calls += 1
                self.stats.recomputed_tokens += sum(r.length for r in self.calls[made])
                run(made, False)

    def unpin(self, c: int) -> None:
        """Call ``c``'s past is built: its segments may go."""
        for e in self.past_edges(c):
            self.pins[e] -= 1
            if not self.pins[e]:
                del self.pins[e]

    def wanted(self, rows: Sequence[Row]) -> set[int]:
        """Edges of ``rows`` not kept that a call from now on reads, or a call computed again
        for it (pinned)."""
        return {e for r in rows for e in r.edges
                if e not in self.seg and (e in self.pins or self.next_use(e) < float("inf"))}

    def keep(self, segments: dict[int, Segment]) -> None:
        """Keep ``segments``, then evict the furthest-used while over the limit."""
        for e, seg in segments.items():
            self.seg[e] = seg
            self.size[e] = sum(k.nbytes + v.nbytes for k, v in seg)
            self.bytes += self.size[e]
        if self.limit is not None:
            while self.bytes > self.limit:
                free = [e for e in self.seg if e not in self.pins]
                if not free:
                    break
                self.drop(max(free, key=lambda e: (self.next_use(e), self.trie.edges[e].start)))
        self.stats.peak_bytes = max(self.stats.peak_bytes, self.bytes)

    def drop(self, e: int) -> None:
        """Forget ``e``'s segment."""
        del self.seg[e]
        self.bytes -= self.size.pop(e)

    def ran(self, c: int) -> None:
        """Call ``c`` ran: forget the segments no later call reads."""
        self.now = c + 1
        for e in [e for e in self.seg if self.next_use(e) == float("inf")]:
            self.drop(e)


class _Book:
    """What each read position gave, and which queries still wait for positions."""

    def __init__(self, plan: _Plan, tqs: Sequence[TokenizedQuery], live: set[int]) -> None:
        self.plan, self.tqs = plan, tqs
        self.waiting = {q: len(plan.keys_of(q)) for q in live}  # positions to run
        self.readers = {k: n for k, need in plan.needs.items()  # wanted queries to read k
                        if (n := len(need.queries & live))}
        self.got: dict[Key, _Got] = {}

    def record(self, keys: list[tuple[int, Key, int]], r_keys: list[tuple[int, Key, int]],
               logits: tuple[Any, Any], resid: np.ndarray | None) -> None:
        """Keep what each read position of a call gave (``logits``: log-probs and lse)."""
        logp, lse = logits
        r_at = {k: i for i, (_, k, _) in enumerate(r_keys)}
        for i, (_, key, _) in enumerate(keys):
            if key not in self.readers:  # read only for queries not wanted
                continue
            n = self.plan.needs[key]
            t = sorted(n.targets)
            vals = logp[i, t].double().numpy() if t else np.zeros(0)
            self.got[key] = _Got(
                lse=float(lse[i]),
                lp=dict(zip(t, (float(x) for x in vals), strict=True)),
                resid=resid[r_at[key]] if resid is not None and n.resid else None,
                full=logp[i].numpy().copy() if n.full else None,
            )

    def finished(self, keys: list[tuple[int, Key, int]]) -> tuple[list[int], list[ReadOut]]:
        """The queries whose last position was among ``keys``, with their read-outs.

        What no other query reads is then freed.
        """
        done: list[int] = []
        for _, key, _ in keys:
            for q in self.plan.needs[key].queries:
                if q not in self.waiting:
                    continue
                self.waiting[q] -= 1
                if self.waiting[q] == 0:
                    done.append(q)
        done.sort()
        outs = [_readout(self.plan, self.tqs, q, self.got) for q in done]
        for q in done:
            for k in self.plan.keys_of(q):
                self.readers[k] -= 1
                if self.readers[k] == 0:
                    del self.got[k]
        return done, outs
