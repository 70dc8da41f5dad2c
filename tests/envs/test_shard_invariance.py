"""Episode i of seed s is the same however many episodes are asked for: a study's first
episodes are a prefix of a longer study's, so any shard of a study directory renders exactly
the episodes one process renders (every environment seeds episode i from (seed, i))."""

from __future__ import annotations

import itertools

import pytest

from belieflens import envs
from belieflens.errors import BeliefLensError


@pytest.mark.parametrize("name", envs.names())
def test_episodes_are_a_prefix_of_a_longer_run(name: str) -> None:
    env = envs.get(name)
    try:
        short = list(env.episodes(2, 11))
    except BeliefLensError:  # needs a generator (a model) with its defaults
        pytest.skip(f"{name} generates text with its defaults")
    longer = list(itertools.islice(env.episodes(5, 11), 2))
    assert [e.index for e in short] == [0, 1]
    assert short == longer
