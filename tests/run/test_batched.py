"""Episodes generating together, on the tiny model: the same texts, prompts and read-outs as
one text at a time (scores to float tolerance), the same log, and a resumed study equal to an
uninterrupted one."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.episodes.base import Environment
from belieflens.model.load import LoadedModel
from belieflens.run.batched import BatchedEnvironment, bind_run
from belieflens.run.extract import ExtractOptions, Progress, QueryRecord, records
from belieflens.run.generation_log import GeneratingEnvironment, GenerationRecord
from belieflens.run.lifecycle import write_cache
from belieflens.store.file import partial_path, read_partial
from tests.conftest import assert_same_data

pytestmark = pytest.mark.usefixtures("one_thread")

TWENTY = dict(animals="2", steps=2, candidates=2, propose=3, eig_sample=2, list_tokens=24,
              answer_tokens=3, max_chars=200, temperature=5.0, answer_temperature=5.0)
"""Tiny-model 20 Questions: its text is noise, so names may be long and the temperature high
enough that it writes more than newlines."""

RECOMMENDER = dict(types=2, movies=2, targets=1, turns=1, delivery="multi-turn-self",
                   conditional=False, reply_tokens=8, temperature=5.0)


def _run(env: Environment, model: LoadedModel, n: int,
         gen_batch: int) -> tuple[list[QueryRecord], tuple[GenerationRecord, ...]]:
    bound, _ = bind_run(env, model, gen_batch=gen_batch)
    assert isinstance(bound, GeneratingEnvironment)
    assert isinstance(bound, BatchedEnvironment) == (gen_batch != 1)
    recs = list(records(bound, n, 0))
    return recs, bound.log.records


def _texts(log: tuple[GenerationRecord, ...]) -> list[tuple[object, ...]]:
    return [(r.role, r.messages, r.seed, r.temperature, r.max_new_tokens, r.text, r.tokens,
             r.stop, r.episode) for r in log if r.role != "score"]


def test_twenty_questions_plays_the_same_games_together(tiny_model: LoadedModel) -> None:
    env = envs.get("twenty-questions", **TWENTY)
    recs_one, log_one = _run(env, tiny_model, 3, gen_batch=1)
    recs_all, log_all = _run(env, tiny_model, 3, gen_batch=0)
    assert _texts(log_all) == _texts(log_one) and len(_texts(log_one)) > 20
    assert [r.query for r in recs_all] == [r.query for r in recs_one]
    scores = [[(r.messages, r.episode) for r in log if r.role == "score"]
              for log in (log_one, log_all)]
    assert scores[0] == scores[1]
    values = [np.array([json.loads(r.text)["logprob"] for r in log if r.role == "score"])
              for log in (log_one, log_all)]
    np.testing.assert_allclose(values[1], values[0], atol=1e-4)  # companions differ: last bits


def test_a_batch_cap_of_two_plays_the_same_games(tiny_model: LoadedModel) -> None:
    env = envs.get("twenty-questions", **{**TWENTY, "steps": 1, "active": False})
    assert _texts(_run(env, tiny_model, 3, gen_batch=2)[1]) == \
        _texts(_run(env, tiny_model, 3, gen_batch=1)[1])


def test_model_stated_answers_shared_by_two_episodes_are_logged_once(
    tiny_model: LoadedModel,
) -> None:
    env = envs.get("belief-attribution", protocol="belieflens", stated="model", condition="both",
                   answer_tokens=4)
    one = _run(env, tiny_model, 5, gen_batch=1)
    together = _run(env, tiny_model, 5, gen_batch=0)
    assert together[1] == one[1] and [r.episode for r in one[1]] == [0, 2, 4]
    assert [r.query for r in together[0]] == [r.query for r in one[0]]


def _interrupt_after(rows: int) -> Callable[[Progress], None]:
    def report(p: Progress) -> None:
        if p.done >= rows:
            raise KeyboardInterrupt

    return report


OPTIONS = ExtractOptions(episodes=3, max_rows=4, window=8)


def _extract(model: LoadedModel, out: Path, gen_batch: int,
             on_progress: Callable[[Progress], None] | None = None) -> Path:
    bound, _ = bind_run(envs.get("recommender", **RECOMMENDER), model, gen_batch=gen_batch)
    return write_cache(bound, model, out, OPTIONS, on_progress=on_progress)


def test_a_resumed_study_equals_an_uninterrupted_one_and_one_at_a_time(
    tiny_model: LoadedModel, tmp_path: Path,
) -> None:
    reference = _extract(tiny_model, tmp_path / "one.h5", gen_batch=1)
    together = _extract(tiny_model, tmp_path / "together.h5", gen_batch=0)
    assert_same_data(reference, together)  # replies, log and read-outs, bit for bit
    out = tmp_path / "resumed.h5"
    with pytest.raises(KeyboardInterrupt):
        _extract(tiny_model, out, 0, on_progress=_interrupt_after(9))
    assert int(read_partial(partial_path(out)).complete.sum()) == 8
    assert_same_data(reference, _extract(tiny_model, out, gen_batch=0))


@pytest.mark.parametrize("sequence", ["model", "model-revealed", "model-mcq"])
def test_protein_world_chooses_the_same_experiments_together(
    tiny_model: LoadedModel, sequence: str,
) -> None:
    """The model's experiments, by EIG under its stated posterior (its generated reply), under
    its revealed belief (its class MCQ scored through the batched scorer) or by its answers to
    the next-experiment MCQ, are those it chooses one at a time; the beliefs the choice used
    agree to float tolerance."""
    env = envs.get("protein-world", preset="belieflens", classes=3, attributes=3, steps=2,
                   sequence=sequence, delivery="single-turn", stated_tokens=16,
                   unparsed="count")
    recs_one, log_one = _run(env, tiny_model, 3, gen_batch=1)
    recs_all, log_all = _run(env, tiny_model, 3, gen_batch=0)
    truths = [{r.episode: r.truth for r in recs} for recs in (recs_one, recs_all)]
    assert sorted(truths[0]) == sorted(truths[1]) == [0, 1, 2]
    for episode, one in truths[0].items():
        together = truths[1][episode]
        assert set(one) == set(together)
        for key, value in one.items():
            if key.startswith(("choice_belief", "choice_eig")):
                assert together[key] == pytest.approx(value, abs=1e-4), key
            else:  # NaN-safe: a stated reply that did not parse is NaN in both
                assert repr(together[key]) == repr(value), key
    sources = {t["choice_source_1"] for t in truths[0].values()}
    if sequence == "model-revealed":
        assert sources == {"eig-revealed"}
    if sequence == "model":  # the tiny random model writes no posterior that parses
        assert sources == {"fallback"}
        assert all(t["stated_valid_1"] == 0.0 for t in truths[0].values())
    assert [r.query for r in recs_all] == [r.query for r in recs_one]
    assert _texts(log_all) == _texts(log_one)
