"""Fused attention (PyTorch SDPA) on the bridge, for the extraction's forward calls only.

TransformerLens' ``PositionEmbeddingsAttentionBridge`` reimplements attention in
eager steps (scores, mask, softmax, weighted sum) so that ``hook_attn_scores`` and
``hook_pattern`` fire. Extraction reads neither. Inside :func:`sdpa_attention` the
attention modules of a plain rotary architecture (Llama, Qwen2: no QK norm, no
soft-capping, no sinks, no gates, full rotation) run the same projections, RoPE
and KV cache through the bridge's own submodules and hooks (``hook_in``,
``hook_q/k/v``, ``hook_rot_q/k``, ``hook_z``, ``hook_out`` all fire), then one
``torch.nn.functional.scaled_dot_product_attention`` call in place of the eager
steps. A module falls back to the bridge's own forward, per call, whenever a hook
is attached to its scores or pattern, and for every other architecture.

Equality with the eager path (within 1e-4 in log-probs) is tested in
``tests/run/test_trie_runner.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal

from belieflens.model.patching import bound_forward, hooked

__all__ = ["AttentionName", "fast_modules", "sdpa_attention", "sdpa_forward"]

AttentionName = Literal["sdpa", "eager"]
"""How the extraction's forward calls compute attention."""

_PLAIN_SUBMODULES = frozenset({"q", "k", "v", "o"})


def _is_plain(module: Any) -> bool:
    """Whether ``module`` is a rotary attention bridge that :func:`sdpa_forward` reproduces."""
    from transformer_lens.model_bridge.generalized_components.position_embeddings_attention import (
        PositionEmbeddingsAttentionBridge,
    )

    if type(module) is not PositionEmbeddingsAttentionBridge:
        return False
    hf = module.original_component
    cfg = module.config
    if hf is None or set(module.submodules) != _PLAIN_SUBMODULES:
        return False
    flags = ("use_split_qkv_input", "use_attn_in", "gated_q_proj", "use_attn_result",
             "rotary_interleaved_cos_sin", "rotary_adjacent_pairs", "qk_norm_after_rope")
    if any(bool(getattr(cfg, f, False)) for f in flags):
        return False
    for attr in ("attn_logit_softcapping", "sinks", "key_multiplier", "sliding_window"):
        if getattr(hf, attr, None) is not None:
            return False
    hf_cfg = getattr(hf, "config", None)
    if getattr(hf_cfg, "clip_qkv", None) is not None:
        return False
    rope = getattr(hf_cfg, "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("llama_4_scaling_beta") is not None:
        return False
    return not module.compatibility_mode and not module.training


def fast_modules(bridge: Any) -> list[Any]:
    """The attention modules of ``bridge`` that :func:`sdpa_attention` switches to SDPA."""
    return [m for m in bridge.modules() if _is_plain(m)]


def _sdpa_mask(mask: Any, q: Any, k: Any) -> tuple[Any, bool]:
    """SDPA's ``attn_mask`` and ``is_causal`` for queries ``q`` over keys ``k`` given the
    layer's 4D mask (or none: causal, the cached positions first)."""
    import torch

    q_len, kv_len = q.shape[-2], k.shape[-2]
    if mask is not None:
        mask = mask[..., -q_len:, :kv_len]
        return (mask.to(q.dtype) if mask.is_floating_point() else mask), False
    if q_len == kv_len:
        return None, True
    # cached positions first: query i sees keys 0 .. kv_len - q_len + i
    return torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device).tril(kv_len - q_len), False


def sdpa_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    """The bridge attention's forward with the eager score/softmax steps fused into SDPA.

    Bound as a method of a plain rotary ``PositionEmbeddingsAttentionBridge``; falls
    back to the class's own forward while its scores or pattern are hooked.
    """
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    if hooked(self, ("hook_attn_scores", "hook_pattern")):  # the eager path is needed
        return type(self).forward(self, *args, **kwargs)
    hf_attn = self.original_component
    if "hidden_states" in kwargs:
        hidden_states = kwargs.pop("hidden_states")
    else:
        hidden_states, args = args[0], args[1:]
    position_embeddings = kwargs.pop("position_embeddings", None)
    attention_mask = kwargs.pop("attention_mask", None)
    hidden_states = self.hook_in(hidden_states)
    input_shape = hidden_states.shape[:-1]
    head_dim = hf_attn.head_dim
    hidden_shape = (*input_shape, -1, head_dim)
    q = self.q(hidden_states).view(hidden_shape).transpose(1, 2)
    k = self.k(hidden_states).view(hidden_shape).transpose(1, 2)
    v = self.v(hidden_states).view(hidden_shape).transpose(1, 2)
    if position_embeddings is None:
        return type(self).forward(self, hidden_states, *args, attention_mask=attention_mask,
                                  **kwargs)  # pragma: no cover - rotary models always pass them
    cos, sin = self._apply_position_embedding_hooks(position_embeddings)
    if cos.shape[-1] != head_dim:  # partial or half-width rotation: not this fast path
        return type(self).forward(self, hidden_states, *args, attention_mask=attention_mask,
                                  position_embeddings=position_embeddings, **kwargs)
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    if hasattr(self, "hook_rot_q"):
        q = self.hook_rot_q(q)
    if hasattr(self, "hook_rot_k"):
        k = self.hook_rot_k(k)
    k, v = self._update_kv_cache(k, v, **kwargs)
    if attention_mask is not None and attention_mask.ndim < 4:
        # a 2D padding mask: not what HF hands a layer; stay exact
        return type(self).forward(self, hidden_states, *args, attention_mask=attention_mask,
                                  position_embeddings=position_embeddings, **kwargs)
    mask, is_causal = _sdpa_mask(attention_mask, q, k)
    groups = getattr(hf_attn, "num_key_value_groups", 1)
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal,
        scale=getattr(hf_attn, "scaling", head_dim**-0.5), enable_gqa=groups > 1,
    )
    out = out.transpose(1, 2).reshape(*input_shape, -1).contiguous()
    o_weight = getattr(getattr(self.o, "original_component", None), "weight", None)
    if isinstance(o_weight, torch.Tensor) and out.dtype != o_weight.dtype:
        out = out.to(o_weight.dtype)
    return self.hook_out(self.o(out)), None


@contextlib.contextmanager
def sdpa_attention(
    bridge: Any, attention: AttentionName = "sdpa", *, modules: list[Any] | None = None
) -> Iterator[int]:
    """Run ``bridge``'s plain attention modules through SDPA inside the block.

    Yields how many modules were switched (0 with ``attention="eager"`` or for an
    architecture without plain modules); their own forwards are restored on exit.
    ``modules``: :func:`fast_modules` of ``bridge``, when the caller computed it once.
    """
    mods: list[Any] = []
    if attention == "sdpa":
        mods = fast_modules(bridge) if modules is None else modules
    with bound_forward(mods, sdpa_forward):
        yield len(mods)
