"""What the offline logit lens needs from a model: the final norm and unembedding rows.

The final norm is read as a black box so that every variant is covered (LayerNorm,
RMSNorm, Gemma's ``1 + weight`` RMSNorm): it is applied to a probe vector
(entries 1 and 2) to recover its effective per-dimension gain, and to
a constant vector to recover its bias.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from jaxtyping import Float, Int

NormKind = Literal["rms", "layer"]


@dataclass(frozen=True)
class FinalNorm:
    """Effective parameters of the final normalisation: ``y = normalise(x) * gain + bias``."""

    kind: NormKind
    eps: float
    gain: Float[np.ndarray, " d_model"]
    bias: Float[np.ndarray, " d_model"]

    def apply(self, x: Float[np.ndarray, "*batch d_model"]) -> Float[np.ndarray, "*batch d_model"]:
        """Normalise ``x`` (float64 internally) exactly as the model's final norm does."""
        x = np.asarray(x, dtype=np.float64)
        if self.kind == "layer":
            x = x - x.mean(axis=-1, keepdims=True)
        scale = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return np.asarray(x / scale * self.gain + self.bias)


@dataclass(frozen=True)
class Unembedding:
    """Rows of the unembedding for a subset of token ids."""

    token_ids: Int[np.ndarray, " lens_token"]
    weight: Float[np.ndarray, "lens_token d_model"]
    bias: Float[np.ndarray, " lens_token"]


def _norm_module(bridge: Any) -> Any:
    ln = bridge.ln_final
    return getattr(ln, "original_component", None) or ln._original_component


def final_norm(bridge: Any) -> FinalNorm:
    """Read the effective final-norm parameters off a bridge."""
    import torch

    module = _norm_module(bridge)
    name = type(module).__name__.lower()
    kind: NormKind = "layer" if ("layernorm" in name and "rms" not in name) else "rms"
    eps = float(
        getattr(module, "variance_epsilon", None) or getattr(module, "eps", None) or 1e-6
    )
    d = int(bridge.cfg.d_model)
    param = next(module.parameters())
    probe = 1.0 + (torch.arange(d, dtype=torch.float64) % 2)  # entries 1 and 2: never centred to 0
    centred = probe - probe.mean() if kind == "layer" else probe
    var = float(centred.pow(2).mean())
    with torch.no_grad():
        bias = (
            module(torch.ones(1, d, dtype=param.dtype, device=param.device))[0].double().cpu()
            if kind == "layer"
            else torch.zeros(d, dtype=torch.float64)
        )
        y = module(probe[None].to(param.dtype).to(param.device))[0].double().cpu()
    gain = (y - bias) * np.sqrt(var + eps) / centred
    return FinalNorm(kind, eps, gain.numpy().astype(np.float64), bias.numpy().astype(np.float64))


def unembedding(bridge: Any, token_ids: Int[np.ndarray, " lens_token"]) -> Unembedding:
    """The unembedding rows (and bias) of ``token_ids``."""
    import torch

    head = bridge.original_model.get_output_embeddings()
    ids = torch.as_tensor(np.asarray(token_ids, dtype=np.int64), device=head.weight.device)
    with torch.no_grad():
        w = head.weight[ids].float().cpu().numpy()
        b = (
            head.bias[ids].float().cpu().numpy()
            if getattr(head, "bias", None) is not None
            else np.zeros(len(ids), dtype=np.float32)
        )
    return Unembedding(np.asarray(token_ids, dtype=np.int64), w, b)
