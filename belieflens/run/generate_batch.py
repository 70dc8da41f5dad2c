"""Many generations decoded together: left-padded rows, one key/value cache, finished rows
dropped.

:func:`generate_batch` answers several :class:`~belieflens.run.generate.GenerationCall`
objects at once, each exactly as :func:`~belieflens.run.generate.generate` would:

- the prompts are rendered as for one call, left-padded to one width, and run once with
  their attention mask and each row's own position ids, filling one key/value cache;
- each decode step feeds every live row its last token; a row ends at a stop token or
  at its own ``max_new_tokens``, and is then dropped from the batch and its cache;
- each row draws from its own ``torch.Generator`` seeded with its own seed, on the CPU in
  float64 (greedy rows take the argmax), so a sampled text depends on its own prompt and
  seed only, never on the rows it was batched with; greedy texts equal the one-at-a-time
  path token for token wherever padding moves no logit across a tie (the logits agree to
  float tolerance);
- with a :class:`~belieflens.run.gen_prefix.PrefixStore`, a prompt that extends a finished
  row runs only its new tokens, and every finished row is kept for later prompts;
- rows are grouped into batches of at most ``max_rows`` whose working set fits the memory
  ``budget`` (:func:`belieflens.run.budget.generation_batches`); a row alone in its batch,
  and every row of a model whose key/value cache failed its load-time check, runs the
  one-at-a-time path itself;
- inside a batch, attention runs as one fused SDPA call and each norm as the model's own
  module where the architecture allows (:func:`~belieflens.model.attention.sdpa_attention`,
  :func:`~belieflens.model.norms.native_norms`, as extraction's forward calls do; equal to
  the bridge's eager steps within float tolerance): the eager path's scores and mask over
  every row and position cost a batch of 8 about a fifth more per decode step here;
- the decode steps run on :data:`~belieflens.run.generate.DECODE_THREADS` CPU thread(s), as
  one call's do: on the shared cores here two threads ran batched steps 5-9x slower.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from belieflens.model.attention import sdpa_attention
from belieflens.model.load import LoadedModel
from belieflens.model.norms import native_norms
from belieflens.run.budget import GEN_ROWS, default_memory, generation_batches, runner_attention
from belieflens.run.gen_prefix import PrefixStore, keep_rows, start
from belieflens.run.generate import (
    DECODE_THREADS,
    Generated,
    GenerationCall,
    StopReason,
    check_call,
    generate,
    next_token,
    stop_token_ids,
)
from belieflens.run.rows import pad_token_id


def generate_batch(
    model: LoadedModel,
    calls: Sequence[GenerationCall],
    *,
    max_rows: int = GEN_ROWS,
    budget: int = 0,
    stop_ids: frozenset[int] | None = None,
    store: PrefixStore | None = None,
) -> list[Generated]:
    """The generation of every call, in order (see the module docstring).

    ``budget``: the bytes a batch may take (0: :func:`~belieflens.run.budget.default_memory`).
    ``store``: finished rows' caches to start from and to add to
    (:mod:`belieflens.run.gen_prefix`); every batch then runs batched, a lone row too.
    A call that is not allowed (settings, context) raises its one-line
    :class:`~belieflens.errors.ParameterError` before anything runs.
    """
    rows = [check_call(model, c) for c in calls]
    stops = stop_token_ids(model) if stop_ids is None else stop_ids
    out: list[Generated | None] = [None] * len(calls)
    spend = budget or default_memory(model.info.device)
    batches = ([[i] for i in range(len(calls))] if not model.info.prefix_reuse else
               generation_batches(model, [len(r) for r in rows],
                                  [c.max_new_tokens for c in calls], budget=spend,
                                  max_rows=max(1, max_rows),
                                  attention=runner_attention(model, reuse=True)))
    for batch in batches:
        if len(batch) == 1 and (store is None or not model.info.prefix_reuse):
            c = calls[batch[0]]
            out[batch[0]] = generate(model, c.messages, seed=c.seed,
                                     max_new_tokens=c.max_new_tokens,
                                     temperature=c.temperature, stop_ids=stops)
            continue
        done = _decode(model, [rows[i] for i in batch], [calls[i] for i in batch], stops, store)
        for i, g in zip(batch, done, strict=True):
            out[i] = g
    return [g for g in out if g is not None]


@contextmanager
def _decode_threads(device: Any) -> Iterator[None]:
    """Torch's CPU threads set to :data:`DECODE_THREADS` inside (restored after)."""
    import torch

    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(min(threads, DECODE_THREADS))
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class _Rows:
    """The decoding state of one batch: each row's call, generator, tokens and end."""

    def __init__(self, calls: Sequence[GenerationCall], stops: frozenset[int]) -> None:
        import torch

        self.calls, self.stops = calls, stops
        self.rngs = []
        for c in calls:
            rng = torch.Generator(device="cpu")
            rng.manual_seed(int(c.seed))
            self.rngs.append(rng)
        self.new: list[list[int]] = [[] for _ in calls]
        self.fed = 0
        """Tokens fed to every live row after its prompt (a row leaves when it ends)."""
        self.stop: list[StopReason] = ["length"] * len(calls)
        self.live = list(range(len(calls)))

    def pick(self, logits: Any) -> tuple[list[int], list[int]]:
        """Each live row's next token from its ``logits`` row (batch order); the batch
        positions of the rows that go on, and their tokens."""
        import torch

        last = logits[:, -1].detach().to("cpu", torch.float64)
        keep: list[int] = []
        toks: list[int] = []
        for b, i in enumerate(self.live):
            call = self.calls[i]
            tok = next_token(last[b], call.temperature, self.rngs[i])
            if tok in self.stops:
                self.stop[i] = "eos"
                continue
            self.new[i].append(tok)
            if len(self.new[i]) < call.max_new_tokens:
                keep.append(b)
                toks.append(tok)
        return keep, toks


def _decode(model: LoadedModel, rows: Sequence[list[int]], calls: Sequence[GenerationCall],
            stops: frozenset[int], store: PrefixStore | None = None) -> list[Generated]:
    """Decode one batch through one key/value cache (prompts started from ``store``'s rows
    where they extend one; finished rows added to it)."""
    import torch

    bridge = model.bridge
    device = next(bridge.original_model.parameters()).device
    pasts = [store.match(r) if store is not None else (0, None) for r in rows]
    state = _Rows(calls, stops)
    with torch.inference_mode(), sdpa_attention(bridge), native_norms(bridge):
        logits, cache, mask, last = start(bridge, rows, pasts, pad_token_id(model.tokenizer),
                                          device)
        with _decode_threads(device):
            while True:
                keep, toks = state.pick(logits)
                if len(keep) < len(state.live):
                    _leave(state, rows, keep, cache, mask, store)
                if not keep:
                    break
                if len(keep) < len(state.live):
                    sel = torch.tensor(keep, dtype=torch.long, device=device)
                    cache.batch_select_indices(sel)
                    mask, last = mask[sel], last[sel]
                    state.live = [state.live[k] for k in keep]
                one = torch.ones((len(keep), 1), dtype=mask.dtype, device=device)
                mask, last = torch.cat([mask, one], dim=1), last + 1
                state.fed += 1
                logits = bridge(
                    torch.tensor(toks, dtype=torch.long, device=device)[:, None],
                    past_key_values=cache, logits_to_keep=1, attention_mask=mask,
                    position_ids=last[:, None],
                )
    decode = model.tokenizer.decode
    return [Generated(ids=tuple(n), text=str(decode(n, skip_special_tokens=True)), stop=s)
            for n, s in zip(state.new, state.stop, strict=True)]


def _leave(state: _Rows, rows: Sequence[list[int]], keep: list[int], cache: Any, mask: Any,
           store: PrefixStore | None) -> None:
    """Store the rows leaving the batch now (those not in ``keep``) with the tokens their
    cache holds: the prompt and the tokens fed after it."""
    if store is None:
        return
    gone = [b for b in range(len(state.live)) if b not in set(keep)]
    fed = [rows[state.live[b]] + state.new[state.live[b]][:state.fed] for b in gone]
    keep_rows(store, cache, mask, gone, fed)
