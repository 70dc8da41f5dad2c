"""A random Llama with SmolLM2-135M's residual shape (30 blocks, d_model 576) and its
tokenizer, for benchmarks whose cost is set by the residual stream rather than the weights.

``narrow=True`` shrinks the MLP and attention (1 head, MLP width 64) so that thousands of
read-outs run in minutes on two cores (memory, checksums); ``narrow=False`` keeps the real
model's widths (9 heads, 3 KV heads, MLP 1536), so compute per block is realistic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from belieflens.model.load import LoadedModel
from belieflens.types import KernelName


def smol_shaped_hf(*, narrow: bool) -> tuple[Any, Any]:
    """The random transformers model (seeded: the same weights every run) and its tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from belieflens.model.load import resolve

    source = resolve("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
    heads, kv_heads, mlp = (1, 1, 64) if narrow else (9, 3, 1536)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=576, intermediate_size=mlp, num_hidden_layers=30,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=64,
        max_position_embeddings=8192, tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    hf = LlamaForCausalLM(cfg)
    hf.eval()  # type: ignore[no-untyped-call]
    return hf, tok


def smol_shaped_random(*, narrow: bool, kernels: KernelName = "auto") -> LoadedModel:
    """The random model on the CPU in float32 (seeded: the same weights every run)."""
    from belieflens.model.load import ModelSource, bridge_from_hf

    hf, tok = smol_shaped_hf(narrow=narrow)
    name = "narrow-random" if narrow else "smol-shaped-random"
    src = ModelSource(name, "directory", Path("."), name)
    return bridge_from_hf(src, "cpu", "float32", hf, tok, "random", "", 0.0, kernels=kernels)
