"""The coin flip's shortcut updaters answer what their names say, on the study's own draws."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens.envs.coin_flip.env import CoinFlip, draw_episode
from belieflens.envs.coin_flip.shortcuts import (
    SHORTCUTS,
    constant,
    exact,
    flat_counts,
    last_flip,
    worth_blind,
)


def _env(**params: object) -> CoinFlip:
    from belieflens.envs import get

    env = get("coin-flip", **params)
    assert isinstance(env, CoinFlip)
    return env


@pytest.mark.parametrize("per_turn", [1, 2])
def test_each_shortcut_gives_one_belief_per_turn_from_the_faces_told(per_turn: int) -> None:
    env = _env(turns=5, per_turn=per_turn)
    draw = draw_episode(env.params, 3, 0)
    faces = draw.faces
    assert len(faces) == 5 * per_turn
    for f in SHORTCUTS.values():
        assert len(f(env, draw, 1.0)) == 6
    # by hand, turn by turn: the counts of the first face after each turn's flips
    heads = [sum(faces[: t * per_turn]) for t in range(6)]
    assert flat_counts(env, draw, 0.5) == pytest.approx(
        [(1 + 0.5 * h) / (2 + 0.5 * t * per_turn) for t, h in enumerate(heads)])
    assert last_flip(env, draw, 1.0)[1:] == [
        0.55 if faces[t * per_turn - 1] == 1 else 0.45 for t in range(1, 6)]
    assert constant(env, draw, 1.0) == [0.5] * 6


def test_a_worth_blind_updater_reads_the_stated_mean_and_is_exact_only_at_its_worth() -> None:
    for worth, matches in ((4, True), (8, False)):
        env = _env(turns=6, prior="stated", prior_means="0.8", prior_weights=str(worth))
        draw = draw_episode(env.params, 5, 1)
        assert (draw.a0, draw.b0) == pytest.approx((0.8 * worth, 0.2 * worth))
        blind = worth_blind(4.0)(env, draw, 1.0)
        assert blind[0] == pytest.approx(0.8)
        assert np.allclose(blind, exact(env, draw, 1.0)) is matches
    # without a stated prior the flat prior's mean is read: worth 2 is then the exact update
    env = _env(turns=6)
    draw = draw_episode(env.params, 5, 1)
    assert worth_blind(2.0)(env, draw, 1.0) == pytest.approx(exact(env, draw, 1.0))
    assert worth_blind(2.0)(env, draw, 1.0) == pytest.approx(flat_counts(env, draw, 1.0))
