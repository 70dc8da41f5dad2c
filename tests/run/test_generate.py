"""Generation on the bridge: sampling rule, reproducibility, KV-cache decoding, stop tokens.

Everything here runs on the tiny random model (fast); the real model is in
test_generate_real.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from belieflens.episodes.base import Message
from belieflens.errors import ParameterError
from belieflens.model.load import LoadedModel
from belieflens.run.generate import (
    ModelGenerator,
    generate,
    next_token,
    prompt_ids,
    stop_token_ids,
)
from belieflens.run.generation_log import GenerationLog

PROMPT = (Message("user", "Tell me something about the sea."),)


def _seeded(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def test_next_token_greedy_is_argmax_ties_to_lowest() -> None:
    logits = torch.tensor([0.1, 3.0, 3.0, -1.0])
    assert next_token(logits, 0.0, _seeded(0)) == 1


def test_next_token_samples_softmax_over_temperature() -> None:
    logits = torch.log(torch.tensor([0.2, 0.5, 0.3]))
    g = _seeded(123)
    draws = np.array([next_token(logits, 1.0, g) for _ in range(4000)])
    freq = np.bincount(draws, minlength=3) / len(draws)
    assert np.allclose(freq, [0.2, 0.5, 0.3], atol=0.03)
    # temperature 0.5 squares the odds: p ∝ (0.2², 0.5², 0.3²)
    g = _seeded(7)
    draws = np.array([next_token(logits, 0.5, g) for _ in range(4000)])
    sharp = np.array([0.04, 0.25, 0.09]) / 0.38
    assert np.allclose(np.bincount(draws, minlength=3) / len(draws), sharp, atol=0.03)


def test_next_token_reproducible_for_a_seed() -> None:
    logits = torch.randn(50, generator=_seeded(1))
    a = [next_token(logits, 0.7, g) for g in [_seeded(5)] for _ in range(20)]
    b = [next_token(logits, 0.7, g) for g in [_seeded(5)] for _ in range(20)]
    c = [next_token(logits, 0.7, g) for g in [_seeded(6)] for _ in range(20)]
    assert a == b and a != c


def test_prompt_ids_use_the_chat_template(tiny_model: LoadedModel) -> None:
    tok = tiny_model.tokenizer
    ids = prompt_ids(tok, PROMPT)
    text = tok.decode(ids)
    assert text.endswith("<|im_start|>assistant\n")
    assert "Tell me something about the sea." in text


def test_stop_tokens_include_end_of_turn(tiny_model: LoadedModel) -> None:
    stops = stop_token_ids(tiny_model)
    assert tiny_model.tokenizer.convert_tokens_to_ids("<|im_end|>") in stops


def test_cached_decoding_equals_full_recompute(tiny_model: LoadedModel) -> None:
    assert tiny_model.info.prefix_reuse
    no_cache = dataclasses.replace(
        tiny_model, info=dataclasses.replace(tiny_model.info, prefix_reuse=False)
    )
    for temperature in (0.0, 5.0):  # the tiny model is peaked: 5.0 makes sampling matter
        a = generate(tiny_model, PROMPT, seed=3, max_new_tokens=8, temperature=temperature,
                     stop_ids=frozenset())
        b = generate(no_cache, PROMPT, seed=3, max_new_tokens=8, temperature=temperature,
                     stop_ids=frozenset())
        assert a.ids == b.ids and len(a.ids) == 8 and a.stop == "length"


def test_greedy_follows_the_argmax_of_a_full_forward(tiny_model: LoadedModel) -> None:
    out = generate(tiny_model, PROMPT, seed=0, max_new_tokens=4, temperature=0.0,
                   stop_ids=frozenset())
    ids = prompt_ids(tiny_model.tokenizer, PROMPT)
    with torch.inference_mode():
        for tok in out.ids:
            logits = tiny_model.bridge(torch.tensor([ids]))[0, -1]
            assert tok == int(logits.argmax())
            ids.append(tok)


def test_seeds_reproduce_and_differ(tiny_model: LoadedModel) -> None:
    def run(seed: int) -> tuple[int, ...]:
        return generate(tiny_model, PROMPT, seed=seed, max_new_tokens=8, temperature=5.0,
                        stop_ids=frozenset()).ids

    assert run(11) == run(11)
    assert len({run(11), run(12), run(13)}) > 1


def test_stops_at_a_stop_token_and_leaves_it_out(tiny_model: LoadedModel) -> None:
    free = generate(tiny_model, PROMPT, seed=0, max_new_tokens=6, temperature=0.0,
                    stop_ids=frozenset())
    stop_at = free.ids[2]
    first = free.ids.index(stop_at)
    out = generate(tiny_model, PROMPT, seed=0, max_new_tokens=6, temperature=0.0,
                   stop_ids=frozenset({stop_at}))
    assert out.stop == "eos" and out.ids == free.ids[:first]


def test_bad_settings_are_one_line_errors(tiny_model: LoadedModel) -> None:
    with pytest.raises(ParameterError, match="max_new_tokens"):
        generate(tiny_model, PROMPT, seed=0, max_new_tokens=0, temperature=0.0)
    with pytest.raises(ParameterError, match="temperature"):
        generate(tiny_model, PROMPT, seed=0, max_new_tokens=2, temperature=-1.0)


def test_model_generator_logs_each_call(tiny_model: LoadedModel) -> None:
    log = GenerationLog()
    gen = ModelGenerator(tiny_model, role="simulator", log=log)
    text = gen(PROMPT, seed=4, max_new_tokens=3, temperature=0.7)
    (rec,) = log.records
    assert rec.role == "simulator" and rec.text == text and rec.seed == 4
    assert rec.messages == PROMPT and rec.max_new_tokens == 3 and rec.temperature == 0.7
    assert rec.tokens <= 3 and rec.episode == -1
