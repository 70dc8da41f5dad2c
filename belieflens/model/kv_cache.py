"""Prefix reuse through the bridge's key/value cache, with the fix it needs and a self-check.

Under transformers 5 the TransformerBridge silently ignores a KV cache: HF hands
the cache to attention as ``cache=``, while ``AttentionBridge._update_kv_cache``
only reads ``past_key_values`` / ``layer_past`` (see DESIGN.md, "Known pitfalls").
:func:`install_cache_fix` maps ``cache`` to ``past_key_values`` there (idempotent),
and :func:`prefix_reuse_works` checks on the loaded model that a prefix run
followed by a suffix run reproduces the full run; extraction reuses prefixes only
when it does. :func:`prefix_cache` reads a prefix of a finished run's cache without
writing it, for the interventions' edits (:mod:`belieflens.interventions.forward`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

_INSTALLED = False


def install_cache_fix() -> None:
    """Make ``AttentionBridge`` honour the cache HF passes as ``cache=`` (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge

    original = AttentionBridge._update_kv_cache

    def _update_kv_cache(self: Any, k: Any, v: Any, **kwargs: Any) -> Any:
        if (
            kwargs.get("past_key_values") is None
            and kwargs.get("layer_past") is None
            and kwargs.get("cache") is not None
        ):
            kwargs["past_key_values"] = kwargs["cache"]
        return original(self, k, v, **kwargs)

    AttentionBridge._update_kv_cache = _update_kv_cache  # type: ignore[method-assign]
    _INSTALLED = True


def encode_prefix(bridge: Any, ids: list[int]) -> Any:
    """Run ``ids`` once and return its key/value cache (batch size 1)."""
    import torch

    device = next(bridge.original_model.parameters()).device
    with torch.inference_mode():
        _, cache = bridge(
            torch.tensor([ids], device=device), return_type="logits_and_cache", use_cache=True,
            logits_to_keep=1,
        )
    return cache


def prefix_reuse_works(bridge: Any, *, tol: float = 1e-3) -> bool:
    """Whether prefix + suffix through the cache reproduces the full run on this model."""
    import torch

    install_cache_fix()
    device = next(bridge.original_model.parameters()).device
    vocab = int(bridge.cfg.d_vocab)
    # 24 tokens split 16 + 8, or fewer where the context is shorter (a toy's 11)
    n = min(24, int(getattr(bridge.cfg, "n_ctx", 24) or 24))
    ids = [(i * 7919 + 13) % vocab for i in range(n)]
    cut = 2 * n // 3
    with torch.inference_mode():
        full = bridge(torch.tensor([ids], device=device))[0, -1].float()
        cache = encode_prefix(bridge, ids[:cut])
        part = bridge(torch.tensor([ids[cut:]], device=device), past_key_values=cache)[0, -1]
    return bool((full - part.float()).abs().max().item() < tol)


def full_cache() -> Any:
    """An empty ``DynamicCache`` whose every layer keeps every position
    (:func:`keeps_every_position`), a sliding one too: a forward fed it attends as the model
    does (a sliding layer's window is its attention mask's), and a prefix of what it keeps is
    a whole past (:func:`prefix_cache`)."""
    from transformers import DynamicCache

    return DynamicCache()


def windowed(config: Any) -> bool:
    """Whether some layer of the HF model configured by ``config`` attends over a window, not
    the whole past (a ``layer_types`` entry other than full attention; without
    ``layer_types``, a ``sliding_window`` set): its mask then counts slots in the cache, so
    a row's tokens must be contiguous there."""
    types = getattr(config, "layer_types", None)
    if types:
        return any(t != "full_attention" for t in types)
    return getattr(config, "sliding_window", None) is not None


def keeps_every_position(cache: Any) -> bool:
    """Whether ``cache`` (a ``DynamicCache``) holds every position of every layer: plain
    ``DynamicLayer`` layers, none sliding or offloaded, so a prefix of it is a whole past."""
    from transformers.cache_utils import DynamicLayer

    layers: list[Any] = list(getattr(cache, "layers", None) or [])
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


@functools.cache
def _prefix_layer() -> type:
    """A read-only cache layer: the first ``length`` positions of another cache's layer,
    at some of its rows.

    ``update`` returns that past with the new keys and values appended and keeps nothing:
    the cache it reads is never written, so one clean run's cache serves any number of
    forwards (a forward on a ``DynamicLayer`` would grow it instead).
    """
    import torch
    from transformers.cache_utils import DynamicLayer

    base: Any = DynamicLayer

    class PrefixLayer(base):  # type: ignore[misc]
        def __init__(self, keys: Any, values: Any, length: int, rows: Any) -> None:
            super().__init__()
            self._k, self._v, self._n, self._rows = keys, values, length, rows
            self.keys, self.values = keys[..., :length, :], values[..., :length, :]
            self.device, self.is_initialized = keys.device, True

        def _past(self, x: Any) -> Any:
            x = x[..., : self._n, :]
            return x if self._rows is None else x.index_select(0, self._rows)

        def update(self, key_states: Any, value_states: Any, *args: Any,
                   **kwargs: Any) -> tuple[Any, Any]:
            return (torch.cat([self._past(self._k), key_states], dim=-2),
                    torch.cat([self._past(self._v), value_states], dim=-2))

        def get_seq_length(self) -> int:
            return int(self._n)

    return PrefixLayer


def prefix_cache(cache: Any, length: int, rows: Any = None) -> Any:
    """A cache whose row ``i`` is the first ``length`` positions of ``cache``'s row
    ``rows[i]`` (``rows``: a long tensor on the cache's device; ``None``: every row, in
    order), read-only (:func:`_prefix_layer`): nothing is copied until a forward reads it.
    ``cache`` must keep every position (:func:`keeps_every_position`)."""
    from transformers import DynamicCache

    out = DynamicCache()
    out.layers = [_prefix_layer()(layer.keys, layer.values, length, rows)
                  for layer in cache.layers]
    return out


def stack_caches(caches: Sequence[Any], width: int) -> Any:
    """One cache whose rows are those of ``caches`` in order, each layer's positions padded
    to ``width`` (what the padding holds is never read: a prefix of a row is its own run's).
    Each cache must keep every position (:func:`keeps_every_position`)."""
    import torch
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    def padded(x: Any) -> Any:
        return torch.nn.functional.pad(x, (0, 0, 0, width - x.shape[-2]))

    out = DynamicCache()
    layers: list[Any] = []
    make: Any = DynamicLayer
    for i in range(len(caches[0].layers)):
        layer = make()
        layer.keys = torch.cat([padded(c.layers[i].keys) for c in caches])
        layer.values = torch.cat([padded(c.layers[i].values) for c in caches])
        layer.is_initialized = True
        layers.append(layer)
    out.layers = layers
    return out
