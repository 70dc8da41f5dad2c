"""The bridge's norms as their HF modules alone: bit-identical, and out of the way of hooks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from belieflens.model.load import LoadedModel
from belieflens.model.norms import native_modules, native_norms
from belieflens.run.trie_runner import run_trie
from tests.run.test_trie_runner import _queries


def _ids(model: LoadedModel) -> Any:
    import torch

    return torch.randint(0, model.info.vocab_size, (2, 12),
                         generator=torch.Generator().manual_seed(0))


def test_native_norms_skip_the_recomputation_and_give_the_same_bits(
    tiny_model: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from transformer_lens.model_bridge.generalized_components.normalization import (
        NormalizationBridge,
    )

    bridge = tiny_model.bridge
    mods = native_modules(bridge)
    assert len(mods) == 2 * tiny_model.info.n_layers + 1  # ln1, ln2 per block, ln_final
    recomputed: list[int] = []
    own = NormalizationBridge._hf_autograd_forward_with_hooks

    def counted(self: Any, x: Any) -> Any:
        recomputed.append(1)
        return own(self, x)

    monkeypatch.setattr(NormalizationBridge, "_hf_autograd_forward_with_hooks", counted)
    seen: list[str] = []

    def out_hook(t: Any, hook: Any) -> Any:  # hook_in/hook_out still fire
        seen.append(hook.name)
        return t

    ids = _ids(tiny_model)
    with torch.inference_mode():
        before = bridge(ids)
        assert len(recomputed) == len(mods)
        recomputed.clear()
        with native_norms(bridge) as n:
            assert n == len(mods)
            assert all("forward" in m.__dict__ for m in mods)
            fast = bridge(ids)
            assert not recomputed
            hooked = bridge.run_with_hooks(ids, fwd_hooks=[("ln_final.hook_out", out_hook)])
        assert seen == ["ln_final.hook_out"]
        assert not recomputed
    assert not any("forward" in m.__dict__ for m in mods)  # restored on exit
    assert torch.equal(before, fast)
    assert torch.equal(before, hooked)


@pytest.mark.filterwarnings("ignore:A forward hook edited hook_scale")
def test_a_hooked_norm_runs_the_bridge_path_and_its_edit_propagates(
    tiny_model: LoadedModel,
) -> None:
    import torch

    bridge = tiny_model.bridge
    ids = _ids(tiny_model)
    seen: list[tuple[int, ...]] = []

    def halve(t: Any, hook: Any) -> Any:
        seen.append(tuple(t.shape))
        return t * 0.5

    hooks = [("blocks.0.ln1.hook_normalized", halve)]
    with torch.inference_mode():
        plain = bridge(ids)
        edited = bridge.run_with_hooks(ids, fwd_hooks=hooks)
        with native_norms(bridge):
            edited_fast = bridge.run_with_hooks(ids, fwd_hooks=hooks)
    assert len(seen) == 2  # the hook fired inside the block too
    assert torch.equal(edited, edited_fast)
    assert not torch.allclose(edited, plain)  # the edit reached the output


def test_trie_run_with_native_norms_equals_the_bridge_norms_bit_for_bit(
    tiny_model: LoadedModel,
) -> None:
    tqs = _queries(tiny_model)

    def run(norms: bool) -> np.ndarray:
        out = {q: o for b, outs, _ in run_trie(tiny_model, tqs, max_rows=4, max_tokens=400,
                                               norms=norms)
               for q, o in zip(b, outs, strict=True)}
        return np.concatenate([np.concatenate([out[q].option_logprob, out[q].resid.ravel()])
                               for q in range(len(tqs))])

    assert np.array_equal(run(True), run(False))


@pytest.mark.real_model
def test_the_real_model_has_native_norms_and_keeps_its_bits(smol_model: LoadedModel) -> None:
    import torch

    tok = smol_model.tokenizer
    ids = torch.tensor([tok("The coin landed heads, then tails.")["input_ids"]])
    bridge = smol_model.bridge
    assert len(native_modules(bridge)) == 2 * smol_model.info.n_layers + 1
    with torch.inference_mode():
        before = bridge(ids)
        with native_norms(bridge):
            fast = bridge(ids)
    assert torch.equal(before, fast)
