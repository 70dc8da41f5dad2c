"""Coin flip: oracles against closed forms, determinism, parameter validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

import belieflens.envs as envs
from belieflens.envs.coin_flip.env import bias_oracle, bin_labels, next_flip_oracle
from belieflens.errors import ParameterError


@given(
    a0=st.floats(0.2, 5), b0=st.floats(0.2, 5), n=st.integers(0, 30), frac=st.floats(0, 1),
)
@settings(max_examples=50, deadline=None)
def test_next_flip_is_posterior_mean(a0: float, b0: float, n: int, frac: float) -> None:
    h = round(frac * n)
    p, q = next_flip_oracle(a0, b0, h, n)
    # E[theta | data] by numerical integration of the unnormalised posterior
    post = stats.beta(a0 + h, b0 + n - h)
    mean = integrate.quad(lambda t: t * post.pdf(t), 0, 1)[0]
    assert p == pytest.approx(mean, abs=1e-6)
    assert p + q == pytest.approx(1.0)


@given(a0=st.floats(0.5, 5), b0=st.floats(0.5, 5), n=st.integers(0, 20),
       frac=st.floats(0, 1), bins=st.integers(2, 10))
@settings(max_examples=40, deadline=None)
def test_bias_bins_are_posterior_masses(a0: float, b0: float, n: int, frac: float,
                                        bins: int) -> None:
    h = round(frac * n)
    mass = bias_oracle(a0, b0, h, n, bins)
    post = stats.beta(a0 + h, b0 + n - h)
    edges = np.linspace(0, 1, bins + 1)
    expected = [integrate.quad(post.pdf, edges[i], edges[i + 1])[0] for i in range(bins)]
    assert np.allclose(mass, expected, atol=1e-6)
    assert sum(mass) == pytest.approx(1.0)


def test_uniform_prior_no_data_is_uniform() -> None:
    assert np.allclose(bias_oracle(1, 1, 0, 0, 5), 0.2)
    assert bin_labels(5)[0] == "0.00 to 0.20"


def test_episodes_deterministic_and_seed_dependent() -> None:
    env = envs.get("coin-flip", turns=4)
    a = list(env.episodes(3, seed=7))
    b = list(env.episodes(3, seed=7))
    c = list(env.episodes(3, seed=8))
    assert a == b
    assert [e.truth for e in a] != [e.truth for e in c]


def test_structure_turns_probes_rotations() -> None:
    env = envs.get("coin-flip", turns="3", bins="4", delivery="all")
    (ep,) = list(env.episodes(1, seed=0))
    assert [t.index for t in ep.turns] == [0, 1, 2, 3]
    for turn in ep.turns:
        names = sorted((p.delivery, p.name) for p in turn.probes)
        assert names == [("multi-turn", "bias"), ("multi-turn", "next-flip"),
                         ("single-turn", "bias"), ("single-turn", "next-flip")]
        for p in turn.probes:
            assert len(p.queries) == len(p.labels)
            assert p.oracle is not None and sum(p.oracle) == pytest.approx(1.0)
    # multi-turn conversation grows by one observation and one acknowledgement per turn
    lens = [len(t.messages["multi-turn"]) for t in ep.turns]
    assert lens == [2, 4, 6, 8]


def test_fixed_theta_and_per_turn() -> None:
    env = envs.get("coin-flip", theta=1.0, turns=2, per_turn=3)
    (ep,) = list(env.episodes(1, seed=0))
    assert ep.truth["theta"] == 1.0
    last = next(p for p in ep.turns[-1].probes if p.name == "next-flip")
    assert last.oracle == pytest.approx(((1 + 6) / (2 + 6), 1 / 8))


@pytest.mark.parametrize(
    "params, fragment",
    [
        ({"bins": 1}, "'bins'"),
        ({"a0": 0}, "'a0'"),
        ({"turns": 0}, "'turns'"),
        ({"theta": 1.5}, "'theta'"),
        ({"delivery": "sideways"}, "'delivery'"),
        ({"bins": "many"}, "'bins'"),
        ({"colour": "red"}, "unknown parameter 'colour'"),
    ],
)
def test_bad_parameters_one_line(params: dict[str, object], fragment: str) -> None:
    with pytest.raises(ParameterError) as e:
        envs.get("coin-flip", **params)
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_environment() -> None:
    with pytest.raises(ParameterError, match="unknown environment"):
        envs.get("roulette")


def test_tempered_oracles_weight_the_evidence() -> None:
    """Under strength S the posterior is Beta(a0 + S*h, b0 + S*(n - h)); S = 1 is the oracle."""
    from belieflens.envs import get
    from belieflens.envs.coin_flip.env import CoinFlip, bias_oracle

    env = get("coin-flip", turns=4, a0=2.0, b0=1.0, delivery="single-turn")
    assert isinstance(env, CoinFlip)
    same = next(env.tempered(1.0).episodes(1, seed=3))
    exact = next(env.episodes(1, seed=3))
    assert [p.oracle for t in same.turns for p in t.probes] == [
        p.oracle for t in exact.turns for p in t.probes]
    tempered = next(env.tempered(0.3).episodes(1, seed=3))
    for turn, ex in zip(tempered.turns, exact.turns, strict=True):
        n = turn.index
        heads = sum(o == "heads" for o in ", ".join(
            t.observation for t in exact.turns[1 : n + 1]).split(", "))
        p = (2.0 + 0.3 * heads) / (3.0 + 0.3 * n)
        assert turn.probes[0].oracle == pytest.approx((p, 1 - p))
        assert turn.probes[1].oracle == pytest.approx(
            bias_oracle(2.0, 1.0, 0.3 * heads, 0.3 * n, 5))
        assert [q.messages for q in turn.probes[0].queries] == [
            q.messages for q in ex.probes[0].queries]  # the same episode, other oracles


@pytest.mark.parametrize("strength", [0.0, -1.0, float("nan")])
def test_a_strength_that_is_not_positive_is_refused(strength: float) -> None:
    from belieflens.envs import get
    from belieflens.envs.coin_flip.env import CoinFlip
    from belieflens.errors import ParameterError

    env = get("coin-flip")
    assert isinstance(env, CoinFlip)
    with pytest.raises(ParameterError, match="'--temper'"):
        env.tempered(strength)
