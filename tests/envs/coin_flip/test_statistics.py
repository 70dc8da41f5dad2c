"""The coin flip's statistic features, computed from its episodes: the counts are the
posterior's sufficient statistic (the oracle follows from them), the last flips are the
observations, one row per turn for every delivery of the same evidence."""

from __future__ import annotations

import numpy as np
import pytest

import belieflens
from belieflens.envs.coin_flip.env import next_flip_oracle
from belieflens.envs.coin_flip.statistics import reported
from belieflens.episodes.base import Episode, Turn
from belieflens.episodes.capabilities import StatisticFeatures


@pytest.mark.parametrize("per_turn", [1, 3])
def test_the_counts_give_the_oracle_and_the_last_flip_is_the_observation(per_turn: int) -> None:
    env = belieflens.envs.get("coin-flip", turns=5, per_turn=per_turn, a0=2.0, b0=1.0)
    assert isinstance(env, StatisticFeatures)
    for episode in env.episodes(4, seed=3):
        f = env.statistic_features(episode)
        assert list(f) == ["counts", "turn", "last 1 flip", "last 2 flips", "last 4 flips"]
        assert all(v.shape[0] == len(episode.turns) for v in f.values())
        for t, turn in enumerate(episode.turns):
            h, n = f["counts"][t]
            assert n == t * per_turn
            assert turn.probes[0].oracle == pytest.approx(next_flip_oracle(2.0, 1.0, h, n))
            last = f["last 1 flip"][t, :3]  # heads, tails, none yet
            words = turn.observation.split(", ") if t else []
            seen = "none" if not words and t == 0 else words[-1]
            assert last.tolist() == {"heads": [1, 0, 0], "tails": [0, 1, 0],
                                     "none": [0, 0, 1]}[seen]
        assert np.array_equal(f["turn"], np.eye(len(episode.turns)))
        assert np.array_equal(f["last 2 flips"][:, 6:], f["turn"])  # the turn beside them


def test_features_are_the_same_width_for_every_episode_and_a_strange_report_is_refused() -> None:
    env = belieflens.envs.get("coin-flip", turns=3)
    assert isinstance(env, StatisticFeatures)
    shapes = {tuple((k, v.shape) for k, v in env.statistic_features(e).items())
              for e in env.episodes(5, seed=0)}
    assert len(shapes) == 1
    odd = Episode(0, (Turn(0, "", {}, ()), Turn(1, "edge", {}, ())))
    with pytest.raises(ValueError, match="reports 'edge', not one of the faces"):
        reported(odd)
    named = Episode(0, odd.turns, {"first_face": "edge", "second_face": "face"})
    assert reported(named) == ([[], [0]], [[], [1.0]])  # a variant names its own faces


@pytest.mark.parametrize("params, extra", [
    ({"sides": "random"}, []),
    ({"prior": "stated"}, ["prior and counts"]),
    ({"reports": "noisy"}, ["evidence"]),
    ({"changepoint": 0.2}, ["recent counts"]),
])
def test_each_variant_adds_what_its_oracle_conditions_on(params: dict[str, object],
                                                         extra: list[str]) -> None:
    """The variants' features: faces read by their episode's names, the stated prior's
    pseudo-counts, the reports' log-odds, the recent counts; the stated prior's features give
    the oracle exactly (with the counts), where the counts alone do not."""
    env = belieflens.envs.get("coin-flip", turns=6, **params)
    assert isinstance(env, StatisticFeatures)
    for episode in env.episodes(3, seed=5):
        f = env.statistic_features(episode)
        assert list(f) == ["counts", "turn", "last 1 flip", "last 2 flips", "last 4 flips",
                           *extra]
        assert f["counts"][-1, 1] == 6
        if "prior and counts" in f:
            for t, turn in enumerate(episode.turns):
                a0, b0, h, n = f["prior and counts"][t]
                assert turn.probes[0].oracle == pytest.approx(next_flip_oracle(a0, b0, h, n))
        if "evidence" in f:
            assert np.isfinite(f["evidence"]).all() and f["evidence"][0, 0] == 0.0
        if "recent counts" in f:
            assert (f["recent counts"][:, :3] <= f["recent counts"][:, 3:]).all()
