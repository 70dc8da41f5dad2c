"""The generation log: records, per-episode assignment, cache-file rows, replay, binding."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

import belieflens.envs as envs
from belieflens.episodes.base import Message
from belieflens.errors import BeliefLensError, CacheFileError
from belieflens.run.generation_log import (
    LOG_VARIABLE,
    GeneratingEnvironment,
    GenerationLog,
    GenerationRecord,
    ReplayGenerator,
    bind_generators,
    log_columns,
    log_rows,
    read_log,
    replay,
    requires_generator,
    requires_simulator,
)


class LoggingFake:
    """TEST DOUBLE: a TextGenerator that answers from a template and logs like ModelGenerator."""

    def __init__(self, log: GenerationLog, role: str, template: str) -> None:
        self.log, self.role, self.template = log, role, template

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        text = self.template.format(seed=seed, n=len(messages))
        self.log.add(GenerationRecord(
            role=self.role, model="fake", seed=seed, temperature=temperature,  # type: ignore[arg-type]
            max_new_tokens=max_new_tokens, messages=messages, text=text, tokens=3, stop="eos",
        ))
        return text


def _record(seed: int, role: str = "reply", episode: int = -1) -> GenerationRecord:
    return GenerationRecord(
        role=role, model="m", seed=seed, temperature=0.7, max_new_tokens=8,  # type: ignore[arg-type]
        messages=(Message("system", "s"), Message("user", f"u{seed}")), text=f"t{seed}",
        tokens=2, stop="length", episode=episode,
    )


def test_record_json_round_trip() -> None:
    r = _record(5, "simulator", 2)
    back = GenerationRecord.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r


def test_log_assigns_records_to_episodes_in_order() -> None:
    seen: list[int] = []
    log = GenerationLog(on_record=lambda r: seen.append(r.seed))
    log.add(_record(1))
    log.add(_record(2))
    log.assign(0)
    log.add(_record(3))
    log.assign(1)
    assert seen == [1, 2, 3]
    assert [r.seed for r in log.of_episode(0)] == [1, 2]
    assert [r.seed for r in log.of_episode(1)] == [3]


def test_log_rows_hold_each_episode_once_on_its_first_row() -> None:
    log = GenerationLog()
    for s, e in ((1, 0), (2, 1), (3, 1)):
        log.add(_record(s, episode=e))
    rows = log_rows(np.array([0, 0, 1, 1, 1, 2]), log)
    assert [bool(x) for x in rows] == [True, False, True, False, False, True]
    assert [d["seed"] for d in json.loads(rows[2])] == [2, 3]
    assert json.loads(rows[5]) == []
    # read back through a Dataset shaped like a cache file
    ds = xr.Dataset({LOG_VARIABLE: ("query", rows), "episode": ("query", [0, 0, 1, 1, 1, 2])})
    assert [r.seed for r in read_log(ds)] == [1, 2, 3]


def test_read_log_without_a_log_is_one_line() -> None:
    with pytest.raises(CacheFileError, match="generated no text"):
        read_log(xr.Dataset({"episode": ("query", [0])}))


def test_replay_answers_exact_calls_only() -> None:
    recs = [_record(1), _record(2, "simulator")]
    replay = ReplayGenerator(recs, "reply")
    assert replay(recs[0].messages, seed=1, max_new_tokens=8, temperature=0.7) == "t1"
    with pytest.raises(BeliefLensError, match="no recorded reply"):
        replay(recs[0].messages, seed=2, max_new_tokens=8, temperature=0.7)
    with pytest.raises(BeliefLensError):
        replay(recs[1].messages, seed=2, max_new_tokens=8, temperature=0.7)  # a simulator call


def test_replay_answers_a_read_out_scored_twice_with_each_record_in_turn() -> None:
    """A read-out scored in two calls can differ in its last digits (other companions in the
    forward call); replay gives each call the value that call got."""
    from belieflens.episodes.base import Query
    from belieflens.run.generation_log import score_messages, score_text

    q = Query((Message("user", "Heads or tails?"),), "Answer:", (" H", " T"), (0, 1))

    def rec(lp: tuple[float, float]) -> GenerationRecord:
        return GenerationRecord(role="score", model="m", seed=0, temperature=0.0,
                                max_new_tokens=0, messages=score_messages(q),
                                text=score_text(q.options, lp), tokens=0, stop="score")

    first, second = (-0.6931471805599453, -0.6931471805599453), (-0.6931472, -0.6931471)
    replay = ReplayGenerator([rec(first), rec(second)], "reply")
    assert replay.score([q]) == (first,)
    assert replay.score([q]) == (second,)
    assert replay.score([q]) == (first,)  # a second replay of the run starts over


def test_bind_recommender_and_log_per_episode() -> None:
    env = envs.get("recommender", types=2, movies=2, targets=1, turns=1,
                   delivery="multi-turn-self", conditional=False)
    assert requires_generator(env) and not requires_simulator(env)
    assert not requires_generator(envs.get("recommender", turns=1, delivery="all"))
    assert requires_generator(envs.get("recommender", turns=1))  # multi-turn-self by default
    log = GenerationLog()
    bound = bind_generators(env, LoggingFake(log, "reply", "reply {seed}"), log=log)
    assert isinstance(bound, GeneratingEnvironment) and bound.name == "recommender"
    assert bound.params == env.params
    eps = list(bound.episodes(2, seed=0))
    for ep in eps:
        recs = log.of_episode(ep.index)
        assert len(recs) == 2  # one reply after the intro, one after the rating
        last = ep.turns[-1].messages["multi-turn-self"]
        assert [m.content for m in last if m.role == "assistant"] == [r.text for r in recs]
    schema, values = log_columns(bound, [0, 0, 1])
    assert set(schema) == {LOG_VARIABLE} and values[LOG_VARIABLE][1] == ""
    assert log_columns(env, [0]) == ({}, {})


def test_bind_judgment_with_a_simulator_and_replay() -> None:
    params = dict(engagement="active", styles="neutral", max_segments=1,
                  delivery="multi-turn-self", sim_retries=0)
    env = envs.get("social-judgment", **params)
    assert requires_generator(env) and requires_simulator(env)
    log = GenerationLog()
    bound = bind_generators(
        env, LoggingFake(log, "reply", "ok {seed}"),
        simulator=LoggingFake(log, "simulator", "<message>styled {seed}</message>"), log=log,
    )
    (ep,) = list(bound.episodes(1, seed=3))
    roles = [r.role for r in log.of_episode(0)]
    assert roles == ["simulator", "reply", "reply"]
    # replay rebuilds the same conversations from the log alone
    rows = log_rows(np.array([0]), log)
    ds = xr.Dataset({LOG_VARIABLE: ("query", rows), "episode": ("query", [0])})
    (again,) = list(replay(envs.get("social-judgment", **params), ds).episodes(1, seed=3))
    assert again.turns[-1].messages == ep.turns[-1].messages
    with pytest.raises(BeliefLensError, match="replay"):
        list(replay(envs.get("social-judgment", **params), ds).episodes(1, seed=4))
