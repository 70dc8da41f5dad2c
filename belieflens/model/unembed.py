"""A model's own unembedding: its output embedding, then the final soft cap where its
configuration has one (Gemma's ``final_logit_softcapping``)."""

from __future__ import annotations

from typing import Any


def final_logits(hf: Any, h: Any) -> Any:
    """Logits (float32) of final-norm outputs ``h`` under the transformers model ``hf`` (or a
    peft wrapper of one): its output embedding and, where configured, ``cap * tanh(logits /
    cap)``."""
    import torch

    logits = hf.get_output_embeddings()(h).float()
    cap = getattr(hf.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits
