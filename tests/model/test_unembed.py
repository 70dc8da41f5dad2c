"""The model's own unembedding: output embedding and final soft cap."""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase

from belieflens.model.unembed import final_logits
from tests.conftest import tiny_gemma, tiny_llama


def test_final_logits_are_the_models_own_with_its_cap(
        smol_tokenizer: PreTrainedTokenizerBase) -> None:
    """From the final norm's output, the model's own logits: a Gemma's soft-capped (within its
    cap of 5), a Llama's as its output embedding gives them."""
    ids = torch.tensor([[1, 5, 9, 14, 2, 7]])
    for model in (tiny_gemma(smol_tokenizer), tiny_llama(smol_tokenizer)):
        with torch.no_grad():
            h = model.model(ids).last_hidden_state
            torch.testing.assert_close(final_logits(model, h), model(ids).logits.float())
    assert final_logits(model, h).abs().max() > 5  # the Llama's are not capped
    gemma = tiny_gemma(smol_tokenizer)
    with torch.no_grad():
        assert final_logits(gemma, gemma.model(ids).last_hidden_state).abs().max() <= 5
