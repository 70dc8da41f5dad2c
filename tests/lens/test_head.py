"""The head (final norm + unembedding): one formula on numpy and torch, read from a file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr

from belieflens.lens.head import FinalNorm, Head


@pytest.mark.parametrize("kind", ["rms", "layer"])
def test_head_agrees_on_numpy_and_torch(kind: str) -> None:
    rng = np.random.default_rng(0)
    d, n_tok = 6, 9
    norm = FinalNorm("layer" if kind == "layer" else "rms", 1e-5,
                     rng.uniform(0.5, 2, size=d), rng.normal(size=d))
    w, b = rng.normal(size=(n_tok, d)), rng.normal(size=n_tok)
    h = rng.normal(size=(3, 2, d)) * 50
    np_head = Head(norm, w, b)
    t_head = Head(norm, torch.as_tensor(w), torch.as_tensor(b))
    got_np = np_head.logits(h)
    got_t = t_head.logits(torch.tensor(h, requires_grad=True))
    assert isinstance(got_np, np.ndarray) and got_np.dtype == np.float64
    assert isinstance(got_t, torch.Tensor) and got_t.requires_grad
    assert np.allclose(got_t.detach().numpy(), got_np, rtol=1e-12, atol=1e-10)
    # by hand
    x = h - h.mean(-1, keepdims=True) if kind == "layer" else h
    ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * norm.gain + norm.bias
    assert np.allclose(np_head.normalise(h), ref)
    assert np.allclose(np_head.logits(h, [1, 3]), got_np[..., [1, 3]])


def test_head_from_dataset() -> None:
    d = 4
    ds = xr.Dataset(
        {"final_norm_gain": ("d_model", np.ones(d, np.float32)),
         "final_norm_bias": ("d_model", np.zeros(d, np.float32)),
         "unembed": (("lens_token", "d_model"), np.eye(3, d, dtype=np.float32)),
         "unembed_bias": ("lens_token", np.zeros(3, np.float32)),
         "lens_token_id": ("lens_token", np.array([5, 9, 11], np.int32))},
        attrs={"final_norm_kind": "layer", "final_norm_eps": 1e-5},
    )
    head = Head.from_dataset(ds)
    assert head.norm.kind == "layer" and head.norm.eps == 1e-5
    assert head.weight.dtype == np.float64
    assert head.token_ids is not None and list(head.token_ids) == [5, 9, 11]
