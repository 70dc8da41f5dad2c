"""Recommender: exact oracles against brute-force enumeration, world, params, deliveries."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import belieflens.envs as envs
from belieflens.envs.recommender.bayes import predictive, type_posterior
from belieflens.envs.recommender.env import Recommender, RecommenderParams
from belieflens.envs.recommender.synthetic import default_world, load_titles, preferences
from belieflens.envs.recommender.world import World
from belieflens.episodes.base import Message, Probe
from belieflens.errors import ParameterError


def brute_force(
    world: World, movies: Sequence[int], ratings: Sequence[int], target: int
) -> tuple[list[float], list[float]]:
    """Enumerate every (z, y_target): joint = pi_z * prod phi * phi_target, then condition."""
    k = world.n_types
    joint: dict[tuple[int, int], float] = {}
    for z, y in itertools.product(range(k), range(5)):
        p = float(world.pi[z])
        for m, r in zip(movies, ratings, strict=True):
            p *= float(world.phi[m, z, r - 1])
        joint[(z, y)] = p * float(world.phi[target, z, y])
    total = sum(joint.values())
    pz = [sum(joint[(z, y)] for y in range(5)) / total for z in range(k)]
    py = [sum(joint[(z, y)] for z in range(k)) / total for y in range(5)]
    return pz, py


def _oracle(probe: Probe) -> tuple[float, ...]:
    """The probe's exact oracle (every recommender probe has one)."""
    assert probe.oracle is not None, probe.name
    return probe.oracle


def test_episode_oracles_match_brute_force() -> None:
    env = envs.get("recommender", turns=6, delivery="single-turn")
    assert isinstance(env, Recommender)
    w = env.world
    for ep in env.episodes(3, seed=5):
        movies = list(w.sequence[:6])
        ratings = [int(r) for r in str(ep.truth["ratings"]).split(",")]
        target = w.movie_ids.index(str(ep.truth["target"]))
        for turn in ep.turns:
            t = turn.index
            pz, py = brute_force(w, movies[:t], ratings[:t], target)
            probes = {p.name: p for p in turn.probes}
            assert np.allclose(_oracle(probes["type"]), pz, atol=1e-12)
            assert np.allclose(_oracle(probes["rating"]), py, atol=1e-12)
            for k in range(w.n_types):
                assert np.allclose(_oracle(probes[f"rating|type={k}"]), w.phi[target, k])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 1000),
    ratings=st.lists(st.integers(1, 5), min_size=0, max_size=8),
)
def test_posterior_matches_brute_force_property(seed: int, ratings: list[int]) -> None:
    w = default_world(seed, types=3, movies=8, targets=2)
    movies = list(w.sequence[: len(ratings)])
    pz, py = brute_force(w, movies, ratings, w.targets[0])
    post = type_posterior(w, movies, ratings)
    assert np.allclose(post, pz, atol=1e-10)
    assert np.allclose(predictive(w, post, w.targets[0]), py, atol=1e-10)


def test_probes_rotations_and_labels() -> None:
    env = envs.get("recommender", turns=2, delivery="all")
    ep = next(env.episodes(1, seed=0))
    assert len(ep.turns) == 3
    turn = ep.turns[1]
    names = [p.name for p in turn.probes]
    assert names.count("type") == 2 and names.count("rating") == 2
    for p in turn.probes:
        assert p.oracle is not None and abs(sum(p.oracle) - 1) < 1e-9
        assert len(p.queries) == len(p.labels)
        assert sorted(q.outcome[0] for q in p.queries) == list(range(len(p.labels)))
    assert {p.delivery for p in turn.probes} == {"single-turn", "multi-turn"}
    no_cond = envs.get("recommender", turns=2, conditional="false", delivery="all")
    assert [p.name for p in next(no_cond.episodes(1, 0)).turns[0].probes] == [
        "type",
        "rating",
        "type",
        "rating",
    ]


def test_prior_turn_and_messages() -> None:
    env = envs.get("recommender", turns=3, delivery="all")
    assert isinstance(env, Recommender)
    ep = next(env.episodes(1, seed=2))
    t0 = ep.turns[0]
    assert np.allclose(next(_oracle(p) for p in t0.probes if p.name == "type"), env.world.pi)
    multi = ep.turns[3].messages["multi-turn"]
    assert [m.role for m in multi] == ["user", "assistant"] * 4
    assert ep.turns[3].observation in multi[-2].content
    single = ep.turns[3].messages["single-turn"][0].content
    assert single.count("stars") + single.count("1 star") >= 3
    # probes extend a copy of the conversation and never enter it
    for p in t0.probes:
        ctx = t0.messages[p.delivery]
        assert p.queries[0].messages[: len(ctx) - 1] == ctx[:-1]
    assert "which type" not in " ".join(m.content for m in multi).lower()


def test_deterministic_in_seed() -> None:
    env = envs.get("recommender", turns=4, delivery="all")
    a = list(env.episodes(3, seed=11))
    b = list(env.episodes(3, seed=11))
    c = list(env.episodes(3, seed=12))
    assert a == b
    assert [e.truth for e in a] != [e.truth for e in c]


def test_default_world_separates_types_by_genre_not_generosity() -> None:
    rng = np.random.default_rng(0)
    w = preferences(rng, 6, 5)
    assert np.allclose(w.sum(1), 0.0)
    assert len({tuple(r) for r in w}) == 5
    for seed in range(5):
        mean = default_world(seed, types=4, movies=20, targets=4).expected_rating()
        assert np.ptp(mean.mean(0)) < 0.25  # similar generosity
    assert np.ptp(mean, axis=1).max() > 1.5  # strong disagreement on some movie
    world = default_world(3, types=4, movies=20, targets=4)
    assert world.descriptions and all("likes" in d for d in world.descriptions)


def test_titles_anonymised_by_default_and_explicit_on_request() -> None:
    names = load_titles()
    shipped = {t for t, _ in names.titles}
    anon = envs.get("recommender", turns=3, delivery="all")
    text = next(anon.episodes(1, 0)).turns[3].messages["single-turn"][0].content
    assert "- Movie 1: " in text and not any(t in text for t in shipped)
    assert not any(g in text for g in names.genres)  # no genres by default (BayesBench)
    with_genres = envs.get("recommender", turns=3, titles="anonymised+genres", delivery="all")
    text = next(with_genres.episodes(1, 0)).turns[3].messages["single-turn"][0].content
    assert "Movie 1 (" in text and not any(t in text for t in shipped)
    explicit = envs.get("recommender", turns=3, titles="explicit", delivery="all")
    text = next(explicit.episodes(1, 0)).turns[3].messages["single-turn"][0].content
    assert any(t in text for t in shipped)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("types", "1"),
        ("turns", "13"),
        ("titles", "real"),
        ("prompt", "verbose"),
        ("decimals", "7"),
        ("world", "/no/such/dir"),
        ("targets", "0"),
        ("delivery", "telepathy"),
        ("world_seed", "-1"),  # numpy refused it with a bare ValueError
    ],
)
def test_bad_params(name: str, value: str) -> None:
    with pytest.raises(ParameterError, match=name):
        envs.get("recommender", **{name: value})


class ReplyFake:
    """TEST DOUBLE: a deterministic reply generator."""

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        return f"noted ({seed % 97}, {len(messages)})"


def test_multi_turn_self_needs_a_generator_and_uses_it() -> None:
    env = envs.get("recommender", turns=2, delivery="multi-turn-self")
    assert isinstance(env, Recommender) and env.requires_generator
    with pytest.raises(ParameterError, match="no generator is bound"):
        env.episodes(1, 0)
    bound = env.bind_generator(ReplyFake())
    assert env.generator is None and bound.generator is not None
    ep = next(bound.episodes(1, 0))
    conv = ep.turns[2].messages["multi-turn-self"]
    assert [m.role for m in conv] == ["user", "assistant"] * 3
    assert all(m.content.startswith("noted") for m in conv[1::2])
    assert ep == next(bound.episodes(1, 0))
    assert {p.delivery for p in ep.turns[0].probes} == {"multi-turn-self"}


def test_params_dataclass_is_frozen() -> None:
    p = RecommenderParams()
    with pytest.raises(AttributeError):
        p.turns = 3  # type: ignore[misc]
