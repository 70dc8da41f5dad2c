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
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from belieflens.errors import BeliefLensError
from belieflens.model.attention import AttentionName, fast_modules, sdpa_attention
from belieflens.model.load import LoadedModel
from belieflens.model.norms import native_modules, native_norms
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
    from transformers import DynamicCache

    cache = DynamicCache()
    if prealloc:
        cache.layers = [_prealloc_layer()() for _ in range(n_layers)]
    return cache


def _padded_past(
    kv: list[list[tuple[Any, Any]] | None], width: int, new: int = 0, *, prealloc: bool = True
) -> Any:
    """One cache holding each row's past, left-padded with zeros to ``width``.

    With ``prealloc`` the buffers have room for ``new`` more positions, which the
    forward writes in place (:func:`_prealloc_layer`); otherwise a ``DynamicCache``
    of the past alone (the forward concatenates).
    """
    import torch
    from transformers import DynamicCache

    some = next(x for x in kv if x is not None)
    size = width + (new if prealloc else 0)
    # each row's past is right-aligned; only the padding left of it needs zeros (masked, but
    # it must be finite); the `new` positions are written by the forward before any read
    lengths = [0 if x is None else int(x[0][0].shape[1]) for x in kv]
    layers = []
    for layer, (k0, v0) in enumerate(some):
        k = torch.empty((len(kv), k0.shape[0], size, k0.shape[2]), dtype=k0.dtype,
                        device=k0.device)
        v = torch.empty((len(kv), v0.shape[0], size, v0.shape[2]), dtype=v0.dtype,
                        device=v0.device)
        for b, x in enumerate(kv):
            pad = width - lengths[b]
            if pad:
                k[b, :, :pad].zero_()
                v[b, :, :pad].zero_()
            if x is not None:
                kb, vb = x[layer]
                k[b, :, pad:width] = kb
                v[b, :, pad:width] = vb
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


def _unembed(model: LoadedModel, h: Any) -> Any:
    """Logits (float32) of final-norm outputs ``h``: the model's own unembedding and cap."""
    import torch

    hf = model.bridge.original_model
    logits = hf.get_output_embeddings()(h).float()
    cap = getattr(hf.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


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
    trie: Trie, rows: list[Row], kv: dict[int, list[tuple[Any, Any]]], pad: int, device: Any,
    *, n_layers: int, dtype: Any, prealloc: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """Input ids (right-padded) and forward kwargs (past, positions, mask) for a call of rows.

    Rows of one edge each get the plain causal layout (a padding mask where the
    pasts differ); rows of several edges get a tree mask (:func:`_tree_mask`).
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
            [kv[e.parent] if e.parent >= 0 else None for e in roots], past, width,
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


def _child_caches(
    trie: Trie, cache: Any, rows: list[Row], width: int
) -> dict[int, list[tuple[Any, Any]]]:
    """The cache (whole prefix) of each edge a later call needs, cut out of the call's cache."""
    import torch

    past = max(trie.edges[r.root].start for r in rows)
    out: dict[int, list[tuple[Any, Any]]] = {}
    for b, r in enumerate(rows):
        col = dict(zip(r.edges, r.cols, strict=True))
        for e in _kept(trie, r):
            chain = []  # the edge and its ancestors in the row, root last
            i = e
            while i in col:
                chain.append(i)
                i = trie.edges[i].parent
            start = trie.edges[r.root].start
            idx = list(range(past - start, past)) + [
                past + col[a] + j for a in reversed(chain) for j in range(len(trie.edges[a].tokens))
            ]
            at = torch.tensor(idx)
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


def run_trie(
    model: LoadedModel,
    tqs: Sequence[TokenizedQuery],
    *,
    max_rows: int,
    max_tokens: int,
    save_logits: bool = False,
    cont_resid: bool = False,
    attention: AttentionName = "sdpa",
    prealloc: bool = True,
    hooks_once: bool = True,
    row_tokens: int = ROW_TOKENS,
    norms: bool = True,
    skip: Collection[int] = (),
) -> Iterator[tuple[list[int], list[ReadOut], int]]:
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
    The last five exist so that ``bench/floor_steps.py`` can measure each step; the
    results agree within 1e-4 either way (tested).

    ``skip``: queries saved by an interrupted run. Only the calls that read another query's
    position run, with those computing their past (:func:`needed_calls`), each as in the
    whole run, so what they compute is the same bit for bit.
    """
    if not tqs:
        return
    plan = _plan(tqs, save_logits=save_logits, cont_resid=cont_resid)
    trie = plan.trie
    bridge = model.bridge
    device = next(bridge.original_model.parameters()).device
    pad = pad_token_id(model.tokenizer)
    names = resid_hook_names(model.info.n_layers)
    reads = plan.reads_by_edge()
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
    caches = _Caches(trie, [rows[r] for call in calls for r in call])
    dtype = next(bridge.original_model.parameters()).dtype
    with contextlib.ExitStack() as stack:
        if hooks_once:  # one registration for every forward call below
            stack.enter_context(bridge.hooks(fwd_hooks=fwd.hooks()))
        for call in calls:
            crows = [rows[r] for r in call]
            ids, kwargs = _call_inputs(trie, crows, caches.by_edge, pad, device,
                                       n_layers=len(names) - 1, dtype=dtype, prealloc=prealloc)
            # (row, (edge, offset), column) of every read position of the call
            keys = [(b, (e, off), c + off) for b, r in enumerate(crows)
                    for e, c in zip(r.edges, r.cols, strict=True) for off in reads.get(e, [])]
            r_keys = [(b, k, p) for b, k, p in keys if plan.needs[k].resid]
            fwd.point(r_keys, keys, device)
            logits = fwd(ids, kwargs, unembed=bool(keys))
            book.record(keys, r_keys, logits, fwd.resid() if r_keys else None)
            if kwargs["use_cache"]:
                caches.keep(_child_caches(trie, kwargs["past_key_values"], crows, ids.shape[1]))
            caches.ran(crows)
            done, outs = book.finished(keys)
            yield done, outs, sum(r.length for r in crows)


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
                sel = _unembed(self.model, self.captured[FINAL])
                logp = torch.log_softmax(sel, dim=-1).cpu()
                lse = torch.logsumexp(sel, dim=-1).cpu()
        return logp, lse

    def resid(self) -> np.ndarray:
        """The residuals read by the last call, ``[read position, layer, d_model]``."""
        import torch

        return torch.stack([self.captured[i] for i in range(len(self.names))], dim=1).numpy()


class _Caches:
    """The KV cache of each edge whose children that run have not all run yet."""

    def __init__(self, trie: Trie, running: Sequence[Row]) -> None:
        self.trie = trie
        self.by_edge: dict[int, list[tuple[Any, Any]]] = {}  # per layer (keys, values)
        self.open_children = dict.fromkeys(range(len(trie.edges)), 0)
        for r in running:
            for e in r.edges:
                if trie.edges[e].parent >= 0:
                    self.open_children[trie.edges[e].parent] += 1

    def keep(self, caches: dict[int, list[tuple[Any, Any]]]) -> None:
        """Keep the caches of edges with children still to run (a call keeps others too:
        children that a resumed run skips)."""
        self.by_edge.update((e, c) for e, c in caches.items() if self.open_children[e] > 0)

    def ran(self, rows: list[Row]) -> None:
        """The edges of ``rows`` ran: drop each parent cache whose last child that was."""
        for r in rows:
            for e in r.edges:
                parent = self.trie.edges[e].parent
                if parent >= 0:
                    self.open_children[parent] -= 1
                    if self.open_children[parent] == 0:
                        self.by_edge.pop(parent, None)


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
