"""Prompts that extend an earlier generation run only their new tokens.

In a multi-turn conversation each generated reply's prompt is the previous prompt, the
previous reply and the next user message: thousands of tokens (BayesBench's recommender
introduction is about 2,500) of which only the last few dozen are new, and a prompt's
forward call runs every one of its positions where a decode step runs one.
:class:`PrefixStore` keeps the key/value cache of every
finished row of a generation batch (its prompt and the tokens fed after it), up to a byte
limit, oldest dropped first; a later prompt that starts with a stored row's tokens reuses
that row's keys and values for the common prefix (:meth:`PrefixStore.match`), and only its
remaining tokens run.

:func:`start` runs the prompts of one batch: rows whose prefix was found start from it,
their pasts left-padded into one cache and their new tokens after it, each token at its true
position and masked from every padding; rows without one run whole. Where a layer's
attention is windowed (:func:`~belieflens.model.kv_cache.windowed`), whose window the mask
draws from slots in the cache, each row's tokens are made contiguous instead: all its
padding on the left, a row with fewer new tokens than the widest reusing that many fewer
stored ones. The cache is :func:`~belieflens.model.kv_cache.full_cache`'s, which keeps every
position of a sliding layer too, so a finished row can be stored. The logits agree with a
whole prompt's to float tolerance (as the radix-tree runner's do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_PREFIX = 16
"""The fewest shared tokens worth reusing a stored row for."""


@dataclass(frozen=True)
class StoredRow:
    """A finished row: the tokens its cache holds and each layer's keys and values
    ``[heads, tokens, d_head]``."""

    ids: np.ndarray
    layers: tuple[tuple[Any, Any], ...]
    nbytes: int


class PrefixStore:
    """The key/value caches of finished generation rows, kept up to ``limit`` bytes (a
    mutable accumulator; oldest dropped first)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rows: list[StoredRow] = []
        self.bytes = 0

    def add(self, ids: Sequence[int], layers: Sequence[tuple[Any, Any]]) -> None:
        """Keep a finished row: its tokens and each layer's ``(keys, values)``."""
        nbytes = sum(k.numel() * k.element_size() * 2 for k, _ in layers)
        if nbytes > self.limit:
            return
        self.rows.append(StoredRow(np.asarray(ids, dtype=np.int64), tuple(layers), nbytes))
        self.bytes += nbytes
        while self.bytes > self.limit:
            self.bytes -= self.rows.pop(0).nbytes

    def match(self, prompt: Sequence[int]) -> tuple[int, StoredRow | None]:
        """The longest prefix of ``prompt`` (all but its last token, which must run for its
        logits) that a stored row holds, and that row; ``(0, None)`` below
        :data:`MIN_PREFIX` tokens."""
        ids = np.asarray(prompt, dtype=np.int64)[:-1]
        best, found = 0, None
        for row in self.rows:
            n = min(len(ids), len(row.ids))
            same = ids[:n] == row.ids[:n]
            common = n if bool(same.all()) else int(np.argmin(same))
            if common > best:
                best, found = common, row
        return (best, found) if best >= MIN_PREFIX else (0, None)


def start(bridge: Any, rows: Sequence[list[int]], pasts: Sequence[tuple[int, StoredRow | None]],
          pad: int, device: Any) -> tuple[Any, Any, Any, Any]:
    """Run the prompts of one batch (inside inference mode): the last position's logits, the
    batch's cache, its attention mask and each row's last position id. Row ``i`` reuses the
    first ``pasts[i][0]`` tokens of ``pasts[i][1]`` where one is given."""
    import torch

    from belieflens.model.kv_cache import full_cache, windowed

    width = max(len(r) - p for r, (p, _) in zip(rows, pasts, strict=True))
    lengths = [p for p, _ in pasts]
    if windowed(bridge.original_model.config):  # each row's tokens contiguous
        lengths = [min(p, max(len(r) - width, 0)) for r, p in zip(rows, lengths, strict=True)]
        pasts = [(p, row) for p, (_, row) in zip(lengths, pasts, strict=True)]
    past = max(lengths)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), past + width), dtype=torch.long)
    pos = torch.zeros((len(rows), width), dtype=torch.long)
    for b, (r, p) in enumerate(zip(rows, lengths, strict=True)):
        new = r[p:]
        ids[b, width - len(new):] = torch.tensor(new, dtype=torch.long)
        mask[b, past - p:past] = 1
        mask[b, past + width - len(new):] = 1
        pos[b, width - len(new):] = torch.arange(p, len(r))
    ids, mask, pos = ids.to(device), mask.to(device), pos.to(device)
    cache = full_cache() if past == 0 else _past_cache(pasts, past, device)
    logits = bridge(ids, past_key_values=cache, use_cache=True, logits_to_keep=1,
                    attention_mask=mask, position_ids=pos)
    return logits, cache, mask, pos[:, -1]


def _past_cache(pasts: Sequence[tuple[int, StoredRow | None]], past: int, device: Any) -> Any:
    """A cache of ``past`` positions: row ``i`` the first ``pasts[i][0]`` positions of its
    stored row, left-padded with zeros (masked)."""
    from belieflens.model.kv_cache import full_cache

    ref = next(row for _, row in pasts if row is not None)
    cache = full_cache()
    for layer, (k_ref, v_ref) in enumerate(ref.layers):
        keys = k_ref.new_zeros((len(pasts), k_ref.shape[0], past, k_ref.shape[-1]))
        values = v_ref.new_zeros((len(pasts), v_ref.shape[0], past, v_ref.shape[-1]))
        for b, (p, row) in enumerate(pasts):
            if row is not None and p:
                k, v = row.layers[layer]
                keys[b, :, past - p:] = k[:, :p]
                values[b, :, past - p:] = v[:, :p]
        cache.update(keys.to(device), values.to(device), layer)
    return cache


def keep_rows(store: PrefixStore, cache: Any, mask: Any, batch_rows: Sequence[int],
              fed: Sequence[Sequence[int]]) -> None:
    """Store the rows at batch positions ``batch_rows``: ``fed[j]`` the tokens their cache
    holds (the masked-in positions, in order): ``cache`` is :func:`start`'s, which keeps every
    position."""
    for b, ids in zip(batch_rows, fed, strict=True):
        keep = mask[b].bool()
        layers = tuple((layer.keys[b][:, keep].clone(), layer.values[b][:, keep].clone())
                       for layer in cache.layers)
        store.add(ids, layers)
