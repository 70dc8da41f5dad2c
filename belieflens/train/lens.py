"""Training tuned-lens translators by KL to the model's final next-token distribution."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from belieflens.errors import ParameterError
from belieflens.lens.head import Head, unembed_hash
from belieflens.lens.tuned import TunedLens, TunedLensConfig
from belieflens.train.lens_data import Positions


@dataclass(frozen=True)
class TrainOptions:
    """Optimiser settings.

    Attributes:
        epochs: passes over the training positions.
        batch_size: positions per step (every layer takes one step on each batch).
        lr: Adam learning rate of the translator matrices ``A_l`` (the biases ``b_l`` are
            scaled by the layer's residual RMS, so the same rate moves them comparably).
        weight_decay: L2 penalty on ``A_l`` and the scaled ``b_l`` (pulls towards the logit lens).
        heldout: fraction of contexts held out for the reported KL (never trained on).
        vocab_top: ``None`` trains on the full vocabulary (as tuned-lens does); an integer
            restricts the training KL to the union of every training position's top
            ``vocab_top`` final tokens, renormalised (faster, approximate). Reported held-out
            KLs always use the full vocabulary.
    """

    epochs: int = 8
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    heldout: float = 0.2
    vocab_top: int | None = None

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ParameterError(
                f"epochs = {self.epochs}, batch_size = {self.batch_size} are not allowed: >= 1"
            )
        if not 0.0 < self.heldout < 1.0:
            raise ParameterError(f"heldout = {self.heldout} is not allowed: between 0 and 1")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ParameterError(
                f"lr = {self.lr}, weight_decay = {self.weight_decay} are not allowed: lr > 0, "
                "weight_decay >= 0"
            )
        if self.vocab_top is not None and self.vocab_top < 1:
            raise ParameterError(f"vocab_top = {self.vocab_top} is not allowed: >= 1 or None")


@dataclass(frozen=True)
class TrainResult:
    """A trained lens and how well it does on held-out positions.

    ``kl_logit`` and ``kl_tuned`` are mean KL(final ‖ lens) in nats per resid layer on the
    held-out positions (full vocabulary); the last layer is 0 for both by construction.
    """

    lens: TunedLens
    kl_logit: Float[np.ndarray, " layer"]
    kl_tuned: Float[np.ndarray, " layer"]
    n_train: int
    n_heldout: int
    seconds: float


def _translate(h: Any, a: Any, b: Any) -> Any:
    """One layer's translator in torch, differentiable in ``a`` and ``b`` (training)."""
    return h + h @ a.T + b


def kl_per_layer(
    resid: Float[np.ndarray, "position layer d_model"],
    head: Head,
    lens: TunedLens | None = None,
    *,
    batch_size: int = 64,
) -> Float[np.ndarray, " layer"]:
    """Mean KL(final ‖ lens_l) per layer over positions, full vocabulary, in nats.

    The final distribution is the head applied to the last layer; ``lens=None`` is the
    logit lens.
    """
    import torch

    x = torch.as_tensor(np.asarray(resid, dtype=np.float32))
    n, n_layer, _ = x.shape
    total = np.zeros(n_layer)
    with torch.no_grad():
        for s in range(0, n, batch_size):
            xb = x[s : s + batch_size]
            logp = torch.log_softmax(head.logits(xb[:, -1]), dim=-1)
            p = logp.exp()
            for layer in range(n_layer):
                h = xb[:, layer]
                if lens is not None:
                    h = _translate(h, torch.as_tensor(lens.weight[layer]),
                                   torch.as_tensor(lens.bias[layer]))
                logq = torch.log_softmax(head.logits(h), dim=-1)
                total[layer] += float((p * (logp - logq)).sum())
    return total / max(n, 1)


def _split(positions: Positions, heldout: float, rng: np.random.Generator) -> tuple[Any, Any]:
    ctx = np.unique(positions.context)
    n_out = min(len(ctx) - 1, max(1, round(heldout * len(ctx))))
    if n_out < 1:
        raise ParameterError("need positions from at least 2 contexts to hold some out")
    out_ctx = rng.choice(ctx, size=n_out, replace=False)
    test = np.isin(positions.context, out_ctx)
    return np.flatnonzero(~test), np.flatnonzero(test)


def _vocab_subset(x: Any, head: Head, top: int, batch_size: int) -> Any:
    import torch

    keep = torch.zeros(head.weight.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for s in range(0, x.shape[0], batch_size):
            idx = head.logits(x[s : s + batch_size, -1]).topk(top, dim=-1).indices
            keep[idx.reshape(-1)] = True
    return torch.nonzero(keep).reshape(-1)


def _fit_translators(x: Any, head: Head, vocab: Any, scale: Any, options: TrainOptions,
                     gen: Any) -> tuple[Any, Any]:
    """Adam over ``options.epochs`` passes of ``x [position, layer, d]`` in the order ``gen``
    draws: each layer's ``A_l`` and raw ``b_l`` (in units of the layer's RMS ``scale``)."""
    import torch

    n, n_layer, d = x.shape
    a = torch.zeros(n_layer - 1, d, d, requires_grad=True)
    b_raw = torch.zeros(n_layer - 1, d, requires_grad=True)
    opt = torch.optim.Adam([a, b_raw], lr=options.lr, weight_decay=options.weight_decay)
    for _ in range(options.epochs):
        order = torch.randperm(n, generator=gen)
        for s in range(0, n, options.batch_size):
            xb = x[order[s : s + options.batch_size]]
            with torch.no_grad():
                p = torch.softmax(head.logits(xb[:, -1], vocab), dim=-1)
            opt.zero_grad()
            for layer in range(n_layer - 1):
                h = _translate(xb[:, layer], a[layer], b_raw[layer] * scale[layer])
                logq = torch.log_softmax(head.logits(h, vocab), dim=-1)
                # cross-entropy: KL(final ‖ lens) up to the final entropy, same gradient
                loss = -(p * logq).sum(dim=-1).mean()
                loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
    return a, b_raw


def train_tuned_lens(model: Any, positions: Positions, rng: np.random.Generator,
                     options: TrainOptions = TrainOptions(), *,
                     head: Head | None = None) -> TrainResult:
    """Train one translator per layer (all but the last) on ``positions`` of ``model``.

    Layer ``l``'s translator maps ``h`` to ``h + A_l h + b_l`` with ``A_l = 0, b_l = 0`` at
    the start (the logit lens); each step lowers mean KL(final ‖ lens_l) over a batch of
    training positions for every layer. ``rng`` draws the held-out contexts and the
    batch order.
    """
    import torch

    t0 = time.perf_counter()
    head = head or Head.from_model(model)
    train_idx, test_idx = _split(positions, options.heldout, rng)
    x = torch.as_tensor(positions.resid[train_idx])
    n, n_layer, d = x.shape
    scale = x.pow(2).mean(dim=(0, 2)).sqrt().clamp(min=1e-6)  # [layer] residual RMS
    vocab = (_vocab_subset(x, head, options.vocab_top, options.batch_size)
             if options.vocab_top is not None else None)
    a, b_raw = _fit_translators(x, head, vocab, scale, options,
                                torch.Generator().manual_seed(int(rng.integers(2**31))))
    weight = np.zeros((n_layer, d, d), dtype=np.float32)
    bias = np.zeros((n_layer, d), dtype=np.float32)
    weight[:-1] = a.detach().numpy()
    bias[:-1] = (b_raw * scale[:-1, None]).detach().numpy()
    info = model.info
    base = TunedLensConfig(
        model_id=info.official_id, revision=info.revision, weights_hash=info.weights_hash,
        unembed_hash=unembed_hash(model), n_layers=n_layer, d_model=d,
        vocab_size=int(head.weight.shape[0]),
    )
    trained = TunedLens(base, weight, bias)
    held = positions.resid[test_idx]
    kl_logit = kl_per_layer(held, head, None, batch_size=options.batch_size)
    kl_tuned = kl_per_layer(held, head, trained, batch_size=options.batch_size)
    seconds = time.perf_counter() - t0
    from belieflens.analysis.decoders.provenance import package_version

    config = TunedLensConfig(
        **{**asdict(base), "train": {
            **asdict(options), "envs": list(positions.envs), "n_contexts": positions.n_contexts,
            "n_train_positions": int(n), "n_heldout_positions": len(test_idx),
            "seconds": round(seconds, 2),
        }, "metrics": {
            "heldout_kl_logit_lens": [round(float(v), 6) for v in kl_logit],
            "heldout_kl_tuned_lens": [round(float(v), 6) for v in kl_tuned],
        }, "belieflens_version": package_version()},
    )
    return TrainResult(
        TunedLens(config, weight, bias), kl_logit, kl_tuned, int(n), len(test_idx), seconds
    )
