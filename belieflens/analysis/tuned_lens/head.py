"""The model's head as the lens sees it: final norm (recomputed) then the full unembedding."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from belieflens.cache.lens_params import FinalNorm, final_norm


def unembed_hash(model: Any) -> str:
    """SHA-256 of the unembedding matrix (float32, C order) of a loaded model or bridge."""
    bridge = getattr(model, "bridge", model)
    w = bridge.original_model.get_output_embeddings().weight
    arr = np.ascontiguousarray(w.detach().float().cpu().numpy())
    return hashlib.sha256(arr.tobytes()).hexdigest()


@dataclass(frozen=True)
class Head:
    """Final norm and unembedding as torch tensors (float32, CPU unless moved).

    ``logits(h)`` = ``W · norm(h) + b``: the same offline head as the logit lens
    (:class:`belieflens.cache.lens_params.FinalNorm` on the residual, then the rows).
    """

    norm: FinalNorm
    weight: Any  # torch.Tensor [vocab, d_model]
    bias: Any  # torch.Tensor [vocab]

    @classmethod
    def from_model(cls, model: Any) -> Head:
        """Read the head off a :class:`~belieflens.cache.models.LoadedModel`."""
        import torch

        bridge = model.bridge
        head = bridge.original_model.get_output_embeddings()
        w = head.weight.detach().float().cpu()
        b = (
            head.bias.detach().float().cpu()
            if getattr(head, "bias", None) is not None
            else torch.zeros(w.shape[0])
        )
        return cls(final_norm(bridge), w, b)

    def normalise(self, h: Any) -> Any:
        """The final norm applied to ``h [..., d_model]`` (differentiable)."""
        import torch

        gain = torch.as_tensor(self.norm.gain, dtype=h.dtype)
        bias = torch.as_tensor(self.norm.bias, dtype=h.dtype)
        if self.norm.kind == "layer":
            h = h - h.mean(dim=-1, keepdim=True)
        scale = torch.sqrt((h * h).mean(dim=-1, keepdim=True) + self.norm.eps)
        return h / scale * gain + bias

    def logits(self, h: Any, vocab: Any | None = None) -> Any:
        """Logits ``[..., vocab]`` (or over the token ids ``vocab`` only) for residuals ``h``."""
        w = self.weight if vocab is None else self.weight[vocab]
        b = self.bias if vocab is None else self.bias[vocab]
        return self.normalise(h) @ w.T + b
