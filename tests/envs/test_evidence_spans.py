"""Every registered environment marks the evidence its read-outs' contexts carry.

A turn carries evidence when it reveals an observation (``Turn.observation``). Wherever a
read-out's context holds that observation's text, marked evidence lies within it (a span
marked ``evidence`` (:class:`~belieflens.episodes.base.Span`): span-based patching
(``--positions evidence``) patches those tokens). A finite grid's scenario states its
observation in its own words, so there every read-out of an episode with an observation must
hold an evidence span. Token-level processes need no marks (each symbol is a turn's evidence
by rule, :mod:`belieflens.readouts.render`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import belieflens.envs as envs
from belieflens.episodes.base import Environment, Episode, Message, Query
from belieflens.episodes.capabilities import FiniteGrid, NeedsGenerator, NeedsSimulator
from tests.envs.test_env_generation import Hashed

SMALL: dict[str, dict[str, object]] = {
    "belief-attribution": {},
    "coin-flip": {},
    "dutch-book": {"answers": "model"},
    "social-judgment": {"max_segments": 2},
    "medical-triage": {"max_segments": 2},
    "protein-world": {"classes": 3, "attributes": 2, "steps": 2, "stated_tokens": 16,
                      "unparsed": "count"},
    "recommender": {"types": 2, "movies": 3, "targets": 1, "turns": 2, "conditional": False},
    "dice": {"sample": True},
    "coins": {"sample": True},
    "preference": {"sample": True},
    "choice": {"sample": True},
    "case-study": {"case": "clinic", "sample": True},
    "twenty-questions": {"animals": "3", "steps": 2, "candidates": 2, "propose": 3,
                         "eig_sample": 2, "active": False},
}
"""Small parameters per environment (the default where absent)."""

EPISODES = 12


def _episodes(name: str) -> tuple[Environment, list[Episode]]:
    env = envs.get(name, **SMALL.get(name, {}))
    if isinstance(env, NeedsGenerator) and env.requires_generator:
        sim = {"simulator": Hashed()} if isinstance(env, NeedsSimulator) else {}
        env = env.bind_generator(Hashed(), **sim)
    return env, list(env.episodes(EPISODES, 0))


def _marked(m: Message, text: str) -> bool:
    """Whether an occurrence of ``text`` in ``m`` holds marked evidence (its words, the
    template around them aside: "They rated Movie 1: 1 star." marks the rating)."""
    marked = {c for s in m.spans if s.role == "evidence" for c in range(s.start, s.end)}
    at = m.content.find(text)
    while at >= 0:
        if marked & set(range(at, at + len(text))):
            return True
        at = m.content.find(text, at + 1)
    return False


def _readouts(episodes: list[Episode]) -> Iterator[tuple[Episode, int, str, Query]]:
    """Every (episode, turn, observation, query) whose turn reveals an observation."""
    for ep in episodes:
        for turn in ep.turns:
            if turn.observation.strip():
                for probe in turn.probes:
                    for q in probe.queries:
                        if q.format != "tokens" and q.messages:
                            yield ep, turn.index, turn.observation.strip(), q


@pytest.mark.parametrize("name", envs.names())
def test_each_registered_environment_with_evidence_marks_it(name: str) -> None:
    env, episodes = _episodes(name)
    checked = 0
    for ep, t, observation, q in _readouts(episodes):
        where = f"{name} episode {ep.index} turn {t}"
        if isinstance(env, FiniteGrid):
            assert any(s.role == "evidence" for m in q.messages for s in m.spans), where
            checked += 1
            continue
        holding = [m for m in q.messages if observation in m.content]
        if holding:
            assert any(_marked(m, observation) for m in holding), (where, observation)
            checked += 1
    token_level = all(q.format == "tokens" for ep in episodes for turn in ep.turns
                      for p in turn.probes for q in p.queries)
    assert checked > 0 or token_level, f"{name}: no read-out holds an observation"
