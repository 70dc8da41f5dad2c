"""The model's head as every lens sees it: the final norm and the unembedding rows.

:class:`Head` is the one implementation of ``logits = W · final_norm(h) + b``; it works on
numpy arrays (float64) and on torch tensors (their own dtype and device, differentiable),
with one formula for both. A cache file stores what it needs (``Head.from_dataset``); a
loaded model gives it directly (``Head.from_model``).

The final norm is read off a model as a black box so that every variant is covered
(LayerNorm, RMSNorm, Gemma's ``1 + weight`` RMSNorm): it is applied to a probe vector
(entries 1 and 2) to recover its effective per-dimension gain, and to a constant vector to
recover its bias.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from jaxtyping import Float, Int

if TYPE_CHECKING:
    import xarray as xr

NormKind = Literal["rms", "layer"]


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


class _Ops:
    """The few array operations the final norm needs, in one array library's spelling."""

    def __init__(self, like: Any) -> None:
        self.torch = _is_torch(like)
        self.like = like

    def asarray(self, x: Any) -> Any:
        if self.torch:
            import torch

            return torch.as_tensor(x, dtype=self.like.dtype, device=self.like.device)
        return np.asarray(x, dtype=np.float64)

    def mean(self, x: Any) -> Any:
        return x.mean(dim=-1, keepdim=True) if self.torch else x.mean(axis=-1, keepdims=True)

    def sqrt(self, x: Any) -> Any:
        return x.sqrt() if self.torch else np.sqrt(x)


@dataclass(frozen=True)
class FinalNorm:
    """Effective parameters of the final normalisation: ``y = normalise(x) * gain + bias``."""

    kind: NormKind
    eps: float
    gain: Float[np.ndarray, " d_model"]
    bias: Float[np.ndarray, " d_model"]

    def apply(self, x: Any) -> Any:
        """Normalise ``x [..., d_model]`` exactly as the model's final norm does.

        A numpy array (or anything array-like) is computed in float64 and returns a numpy
        array; a torch tensor stays in its dtype and device (and is differentiable).
        """
        ops = _Ops(x)
        x = x if ops.torch else ops.asarray(x)
        if self.kind == "layer":
            x = x - ops.mean(x)
        scale = ops.sqrt(ops.mean(x * x) + self.eps)
        return x / scale * ops.asarray(self.gain) + ops.asarray(self.bias)


@dataclass(frozen=True)
class Head:
    """Final norm then unembedding: ``logits(h) = normalise(h) @ weight.T + bias``.

    ``weight [row, d_model]`` and ``bias [row]`` are the unembedding rows of ``token_ids``
    (``None``: the full vocabulary, row = token id). They are float64 numpy arrays when read
    from a cache file and float32 torch tensors when read from a model (tuned-lens training);
    ``normalise`` and ``logits`` take residuals of either kind.
    """

    norm: FinalNorm
    weight: Any
    bias: Any
    token_ids: Int[np.ndarray, " row"] | None = None

    def normalise(self, h: Any) -> Any:
        """The final norm applied to ``h [..., d_model]`` (:meth:`FinalNorm.apply`)."""
        return self.norm.apply(h)

    def logits(self, h: Any, vocab: Any | None = None) -> Any:
        """Logits ``[..., row]`` of residuals ``h`` (over the rows ``vocab`` only, if given)."""
        w = self.weight if vocab is None else self.weight[vocab]
        b = self.bias if vocab is None else self.bias[vocab]
        return self.normalise(h) @ w.T + b

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> Head:
        """The head a cache file stores: final-norm attributes and the ``lens_token`` rows."""
        kind = str(ds.attrs.get("final_norm_kind", "rms"))
        norm = FinalNorm(
            kind="layer" if kind == "layer" else "rms",
            eps=float(ds.attrs.get("final_norm_eps", 1e-6)),
            gain=np.asarray(ds["final_norm_gain"].values, dtype=np.float64),
            bias=np.asarray(ds["final_norm_bias"].values, dtype=np.float64),
        )
        ids = (np.asarray(ds["lens_token_id"].values, dtype=np.int64)
               if "lens_token_id" in ds.variables else None)
        return cls(norm, np.asarray(ds["unembed"].values, dtype=np.float64),
                   np.asarray(ds["unembed_bias"].values, dtype=np.float64), ids)

    @classmethod
    def from_model(cls, model: Any) -> Head:
        """The full head of a :class:`~belieflens.model.load.LoadedModel` (float32 torch)."""
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


def unembed_hash(model: Any) -> str:
    """SHA-256 of the unembedding matrix (float32, C order) of a loaded model or bridge."""
    bridge = getattr(model, "bridge", model)
    w = bridge.original_model.get_output_embeddings().weight
    arr = np.ascontiguousarray(w.detach().float().cpu().numpy())
    return hashlib.sha256(arr.tobytes()).hexdigest()


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
