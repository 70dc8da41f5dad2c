"""Generation on the real embedded model: reproducible per seed, varied across seeds, greedy."""

from __future__ import annotations

import pytest
import torch

from belieflens.episodes.base import Message
from belieflens.model.load import LoadedModel
from belieflens.run.generate import ModelGenerator, generate, prompt_ids

pytestmark = pytest.mark.real_model

PROMPT = (Message("user", "Describe your favourite season in one sentence."),)
TOKENS = 8


def test_sampling_reproducible_per_seed_and_varied_across_seeds(smol_model: LoadedModel) -> None:
    gen = ModelGenerator(smol_model)
    a = gen(PROMPT, seed=1, max_new_tokens=TOKENS, temperature=0.7)
    assert a.strip()
    assert gen(PROMPT, seed=1, max_new_tokens=TOKENS, temperature=0.7) == a
    assert gen(PROMPT, seed=2, max_new_tokens=TOKENS, temperature=0.7) != a


def test_greedy_at_temperature_zero(smol_model: LoadedModel) -> None:
    # greedy ignores the seed and follows the argmax of a full forward (KV-cache decoding
    # against re-running the sequence is compared token by token on the tiny model)
    a = generate(smol_model, PROMPT, seed=1, max_new_tokens=TOKENS, temperature=0.0)
    b = generate(smol_model, PROMPT, seed=2, max_new_tokens=TOKENS, temperature=0.0)
    assert a.ids == b.ids and len(a.ids) == TOKENS
    ids = prompt_ids(smol_model.tokenizer, PROMPT) + list(a.ids[:-1])
    with torch.inference_mode():
        logits = smol_model.bridge(torch.tensor([ids]))[0]
    n = len(a.ids)
    assert [int(t) for t in logits[-n:].argmax(-1)] == list(a.ids)
    assert "<|im_end|>" not in a.text and "<|im_start|>" not in a.text


def test_stops_at_end_of_turn(smol_model: LoadedModel) -> None:
    out = generate(smol_model, (Message("user", "Say just the word: yes"),), seed=0,
                   max_new_tokens=16, temperature=0.0)
    assert out.stop == "eos" and 1 <= len(out.ids) < 16
