"""Episodes generating together on the real embedded model: greedy texts equal the
one-at-a-time generator's token for token, for a 20 Questions and a multi-turn-self
recommender study (both kept small)."""

from __future__ import annotations

import pytest
import torch

import belieflens.envs as envs
from belieflens.episodes.base import Environment
from belieflens.model.load import LoadedModel
from belieflens.run.batched import bind_run
from belieflens.run.extract import QueryRecord, records
from belieflens.run.generation_log import GeneratingEnvironment, GenerationRecord

pytestmark = pytest.mark.real_model


def _run(env: Environment, model: LoadedModel, n: int,
         gen_batch: int) -> tuple[list[QueryRecord], tuple[GenerationRecord, ...]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        bound, _ = bind_run(env, model, gen_batch=gen_batch)
        assert isinstance(bound, GeneratingEnvironment)
        return list(records(bound, n, 0)), bound.log.records
    finally:
        torch.set_num_threads(threads)


def _texts(log: tuple[GenerationRecord, ...]) -> list[tuple[object, ...]]:
    return [(r.role, r.messages, r.seed, r.text, r.tokens, r.stop, r.episode)
            for r in log if r.role != "score"]


def test_twenty_questions_greedy_texts_equal_one_at_a_time(smol_model: LoadedModel) -> None:
    env = envs.get("twenty-questions", animals="Zebra,Kiwi", steps=1, candidates=2, propose=3,
                   eig_sample=2, list_tokens=24, answer_tokens=3, temperature=0.0,
                   answer_temperature=0.0, active=False)
    recs_one, log_one = _run(env, smol_model, 2, gen_batch=1)
    recs_all, log_all = _run(env, smol_model, 2, gen_batch=0)
    assert _texts(log_all) == _texts(log_one)
    assert {r.role for r in log_one} == {"reply", "simulator", "score"}
    assert [r.query for r in recs_all] == [r.query for r in recs_one]


def test_recommender_multi_turn_self_greedy_replies_equal_one_at_a_time(
    smol_model: LoadedModel,
) -> None:
    env = envs.get("recommender", types=2, movies=2, targets=1, turns=1, conditional=False,
                   delivery="multi-turn-self", temperature=0.0, reply_tokens=16)
    recs_one, log_one = _run(env, smol_model, 2, gen_batch=1)
    recs_all, log_all = _run(env, smol_model, 2, gen_batch=0)
    assert log_all == log_one and len(log_one) == 4
    assert len({r.text for r in log_one}) > 1  # different prompts, different replies
    assert [r.query for r in recs_all] == [r.query for r in recs_one]
