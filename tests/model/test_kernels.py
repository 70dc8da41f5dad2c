"""oneDNN linear kernels (``--kernels onednn``) agree with the default kernels."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

import belieflens.envs as envs
from belieflens.errors import ParameterError
from belieflens.model.kernels import onednn_works, resolve_kernels, use_kernels
from belieflens.model.load import ModelSource, bridge_from_hf
from belieflens.readouts.render import bos_policy, render
from belieflens.run import runner
from tests.conftest import tiny_llama

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def test_onednn_equals_default_kernels_on_a_tiny_model(
    smol_tokenizer: PreTrainedTokenizerBase
) -> None:
    hf = tiny_llama(smol_tokenizer)
    src = ModelSource("tiny-random", "directory", Path("."), "tiny-random")
    plain = bridge_from_hf(src, "cpu", "float32", copy.deepcopy(hf), smol_tokenizer, "r", "", 0.0,
                           kernels="default")
    fast = bridge_from_hf(src, "cpu", "float32", hf, smol_tokenizer, "r", "", 0.0,
                          kernels="onednn")
    assert fast.info.kernels == "onednn" and plain.info.kernels == "default"
    assert fast.info.prefix_reuse  # the KV-cache self-check passes with the new kernels
    bos = bos_policy(smol_tokenizer)
    tqs = [render(smol_tokenizer, q, bos=bos)
           for ep in envs.get("coin-flip", turns=2).episodes(1, seed=1)
           for t in ep.turns for p in t.probes for q in p.queries]
    a = runner.run_batch(plain, tqs)
    b = runner.run_batch(fast, tqs)
    for x, y in zip(a, b, strict=True):
        scale = max(1.0, float(np.abs(x.resid).max()))
        assert np.abs(x.resid - y.resid).max() <= 1e-4 * scale
        assert np.allclose(x.option_logprob, y.option_logprob, atol=1e-4)


def test_kernels_changes_every_linear_layer_and_only_on_cpu(
    smol_tokenizer: PreTrainedTokenizerBase
) -> None:
    hf = tiny_llama(smol_tokenizer)
    linear = [m for m in hf.modules() if type(m) is torch.nn.Linear]

    def patched() -> int:
        return sum("forward" in m.__dict__ for m in linear)

    assert use_kernels(hf, "default", "cpu") == "default" and patched() == 0
    assert onednn_works()  # this machine's torch has oneDNN
    assert resolve_kernels("auto", "cpu", vendor="AuthenticAMD") == "onednn"
    assert resolve_kernels("auto", "cpu", vendor="GenuineIntel") == "default"
    assert resolve_kernels("auto", "cpu") in ("onednn", "default")
    assert resolve_kernels("auto", "cuda:0", vendor="AuthenticAMD") == "default"
    assert resolve_kernels("onednn", "cpu", vendor="GenuineIntel") == "onednn"
    assert use_kernels(hf, "onednn", "cpu") == "onednn" and patched() == len(linear) > 0
    with pytest.raises(ParameterError, match="--device cpu"):
        use_kernels(hf, "onednn", "cuda:0")


def test_a_onednn_layer_passes_gradients_back_as_the_default_kernel_does() -> None:
    """oneDNN's linear has no backward: a forward that records gradients runs the default
    kernel, so a gradient through the layer (interchange training) is the default's, not
    dropped; without gradients the layer still runs oneDNN's op."""
    gen = torch.Generator().manual_seed(0)
    plain = torch.nn.Linear(16, 8)
    fast = copy.deepcopy(plain)
    assert use_kernels(fast, "onednn", "cpu") == "onednn"
    x = torch.randn(3, 16, generator=gen)
    grads = []
    for layer in (plain, fast):
        xi = x.clone().requires_grad_(True)
        (layer(xi) ** 2).sum().backward()
        assert xi.grad is not None and layer.weight.grad is not None
        grads.append((xi.grad, layer.weight.grad))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)
    calls: list[str] = []
    real = torch.ops.mkldnn._linear_pointwise

    def spy(*args: object) -> torch.Tensor:
        calls.append("onednn")
        return real(*args)  # type: ignore[no-any-return]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(torch.ops.mkldnn, "_linear_pointwise", spy)
        with torch.no_grad():
            torch.testing.assert_close(fast(x), plain(x), rtol=1e-5, atol=1e-5)
        fast(x.clone().requires_grad_(True))
    assert calls == ["onednn"]


def test_auto_leaves_a_dtype_without_a_onednn_primitive_on_the_default_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a CPU whose oneDNN has no bfloat16 linear, ``auto`` must not route a bfloat16 model
    there (it crashed at the first forward), and ``onednn`` is refused in one line."""
    import torch

    from belieflens.errors import ParameterError
    from belieflens.model import kernels

    monkeypatch.setattr(kernels, "onednn_works", lambda dtype="float32": dtype == "float32")
    hf = torch.nn.Sequential(torch.nn.Linear(4, 3)).to(torch.bfloat16)
    assert kernels.use_kernels(hf, "auto", "cpu") == "default"
    with pytest.raises(ParameterError, match="not available in bfloat16"):
        kernels.use_kernels(hf, "onednn", "cpu")
    assert kernels.resolve_kernels("auto", "cpu", vendor="AuthenticAMD", dtype="bfloat16") == \
        "default"
    assert kernels.resolve_kernels("auto", "cpu", vendor="AuthenticAMD") == "onednn"

