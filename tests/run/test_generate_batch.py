"""Generations decoded together equal the one-at-a-time path, row by row, on the tiny model:
greedy and sampled, prompts of different lengths, own stop and length limits, any company."""

from __future__ import annotations

import dataclasses

import pytest

from belieflens.episodes.base import Message
from belieflens.errors import ParameterError
from belieflens.model.load import LoadedModel
from belieflens.run.budget import generation_bytes
from belieflens.run.generate import Generated, GenerationCall, generate, prompt_ids
from belieflens.run.generate_batch import generate_batch

pytestmark = pytest.mark.usefixtures("one_thread")

NO_STOP: frozenset[int] = frozenset()


def _calls() -> list[GenerationCall]:
    """Six prompts of different lengths; odd rows sampled at a temperature the peaked tiny
    model needs for varied text, even rows greedy; each its own length limit."""
    return [
        GenerationCall((Message("user", "tell me about " + "the sea " * (3 * i)),), seed=10 + i,
                       max_new_tokens=3 + 2 * i, temperature=5.0 if i % 2 else 0.0)
        for i in range(6)
    ]


def _one(model: LoadedModel, c: GenerationCall, stops: frozenset[int] = NO_STOP) -> Generated:
    return generate(model, c.messages, seed=c.seed, max_new_tokens=c.max_new_tokens,
                    temperature=c.temperature, stop_ids=stops)


def test_a_batch_equals_one_call_at_a_time(tiny_model: LoadedModel) -> None:
    calls = _calls()
    alone = [_one(tiny_model, c) for c in calls]
    together = generate_batch(tiny_model, calls, stop_ids=NO_STOP)
    assert together == alone
    assert [len(g.ids) for g in together] == [c.max_new_tokens for c in calls]
    assert len({g.ids for g in together[1::2]}) == 3  # the sampled rows differ


def test_a_row_depends_on_its_own_prompt_and_seed_only(tiny_model: LoadedModel) -> None:
    calls = _calls()
    row = calls[3]
    for company in ([row, calls[0]], [calls[5], calls[1], row], [row, row]):
        assert generate_batch(tiny_model, company, stop_ids=NO_STOP)[company.index(row)] == \
            _one(tiny_model, row)
    reseeded = dataclasses.replace(row, seed=row.seed + 1)
    assert generate_batch(tiny_model, [row, reseeded], stop_ids=NO_STOP)[1].ids != \
        _one(tiny_model, row).ids


def test_rows_end_at_their_stop_token_and_leave_the_batch(tiny_model: LoadedModel) -> None:
    calls = [dataclasses.replace(c, max_new_tokens=8) for c in _calls()]
    free = [_one(tiny_model, c) for c in calls]
    stop_at = free[1].ids[2]  # a token sampled row 1 writes: it stops there, others may not
    stops = frozenset({stop_at})
    alone = [_one(tiny_model, c, stops) for c in calls]
    together = generate_batch(tiny_model, calls, stop_ids=stops)
    assert together == alone
    assert together[1].stop == "eos" and together[1].ids == free[1].ids[:free[1].ids.index(stop_at)]
    assert {g.stop for g in together} == {"eos", "length"}


def test_a_small_budget_splits_batches_without_changing_a_text(tiny_model: LoadedModel) -> None:
    calls = _calls()
    longest = max(len(prompt_ids(tiny_model.tokenizer, c.messages)) for c in calls)
    two_rows = generation_bytes(tiny_model, 2, longest, max(c.max_new_tokens for c in calls))
    alone = [_one(tiny_model, c) for c in calls]
    assert generate_batch(tiny_model, calls, budget=two_rows, stop_ids=NO_STOP) == alone
    assert generate_batch(tiny_model, calls, max_rows=1, stop_ids=NO_STOP) == alone


def test_a_bad_call_is_one_line_before_anything_runs(tiny_model: LoadedModel) -> None:
    bad = dataclasses.replace(_calls()[0], max_new_tokens=0)
    with pytest.raises(ParameterError, match="max_new_tokens = 0"):
        generate_batch(tiny_model, [_calls()[1], bad])
    assert generate_batch(tiny_model, []) == []
