"""ProteinWorld: worlds, likelihoods (analytic vs Monte Carlo), EIG two ways, episodes."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens import envs
from belieflens.envs.protein_world.env import ProteinWorld, ProteinWorldParams, experiment_label
from belieflens.envs.protein_world.oracle import (
    active_run,
    best_experiment,
    eig,
    eig_mc,
    experiment_grids,
    posterior,
)
from belieflens.envs.protein_world.world import (
    ATTRIBUTES,
    World,
    fictional_names,
    generate_world,
    likelihood_exact,
    likelihood_mc,
    percent_prior,
)
from belieflens.episodes.base import Message
from belieflens.errors import ParameterError


def _world(difficulty: str = "simple", seed: int = 0, samples: int = 4000) -> World:
    """A world of the ``belieflens`` preset: every attribute measured with Gaussian noise."""
    return generate_world(
        np.random.default_rng(seed), classes=4, attributes=3, difficulty=difficulty,  # type: ignore[arg-type]
        spread=2.0, tau=1.0, sigma=0.5, rho=1.5, mc_samples=samples, uniform_prior=False,
    )


def test_names_and_prior() -> None:
    names = fictional_names(10, np.random.default_rng(1))
    assert len(set(names)) == 10 and all(n[0].isupper() for n in names)
    prior = percent_prior(np.array([0.001, 0.5, 0.499]))
    assert sum(prior) == pytest.approx(1.0)
    assert min(prior) >= 0.01
    assert all(abs(p * 100 - round(p * 100)) < 1e-9 for p in prior)


def test_analytic_likelihood_equals_monte_carlo_within_se() -> None:
    """Where a class's likelihood has its mass (within 2.5 sd); in far tails MC is a rare event."""
    world = _world("simple")
    sd = float(np.hypot(world.sds[0, 0], world.sigma))
    zs = []
    for j in range(3):
        for mu in world.means[:, j]:
            for y in mu + sd * np.linspace(-2.5, 2.5, 7):
                exact = likelihood_exact(world, j, float(y))
                mc = likelihood_mc(world, j, float(y))
                near = np.abs(y - world.means[:, j]) <= 2.5 * sd + 1e-9
                z = ((mc.value - exact.value) / mc.se)[near]
                zs.extend(z.tolist())
    z_all = np.array(zs)
    assert len(z_all) > 80
    assert np.all(np.abs(z_all) < 5)
    assert abs(float(z_all.mean())) < 0.5  # no systematic bias
    assert 0.5 < float(z_all.std()) < 1.6  # the reported SE is the right size


def test_analytic_posterior_equals_monte_carlo_posterior_within_se() -> None:
    exact = _world("simple")
    history = [(0, 0.7), (1, -0.4), (2, 1.1)]
    p_exact = np.array(posterior(exact, history).probs)
    # the same world scored by Monte Carlo over its previous attributes: with rho = 0 the
    # Rao-Blackwellised estimate has nothing left to average, so it is the closed form
    mc_world = World(**{**exact.__dict__, "difficulty": "hard"})
    post = posterior(mc_world, history)
    assert np.all(np.array(post.se) == 0)
    assert np.allclose(post.probs, p_exact, rtol=0, atol=1e-15)
    # plain Monte Carlo over whole simulated proteins agrees within its standard error
    logp = np.log(np.asarray(exact.prior))
    rel_var = np.zeros(4)
    for j, y in history:
        lk = likelihood_mc(exact, j, y)
        logp, rel_var = logp + lk.log_value, rel_var + lk.rel_se**2
    p_mc = np.exp(logp - logp.max())
    p_mc /= p_mc.sum()
    se = p_mc * np.sqrt(rel_var) * 2
    assert np.all(np.abs(p_mc - p_exact) < 5 * se + 1e-12)


def test_hard_world_reports_se_and_is_normalised() -> None:
    world = _world("hard")
    post = posterior(world, [(1, 0.3), (2, -1.0)])
    assert sum(post.probs) == pytest.approx(1.0)
    assert all(s > 0 for s in post.se)
    with pytest.raises(ValueError):
        likelihood_exact(world, 0, 0.0)
    far = posterior(world, [(2, 60.0)])  # far outside every class: no underflow to NaN
    assert np.all(np.isfinite(far.probs))


@pytest.mark.parametrize("difficulty", ["simple", "hard"])
def test_eig_two_ways_agree(difficulty: str) -> None:
    world = _world(difficulty, samples=1000)
    grids = experiment_grids(world)
    for prior in (world.prior, (0.97, 0.01, 0.01, 0.01), (0.25,) * 4):
        for g in grids:
            a, b = eig(prior, g, "entropy"), eig(prior, g, "kl")
            assert a == pytest.approx(b, abs=1e-7)
            assert 0 <= a <= np.log(4) + 1e-9


def test_eig_grid_matches_monte_carlo() -> None:
    world = _world("simple")
    grids = experiment_grids(world)
    for j, g in enumerate(grids):
        value, se = eig_mc(world, world.prior, j, np.random.default_rng(j), n=3000)
        assert abs(eig(world.prior, g) - value) < 5 * se


def test_eig_of_a_certain_prior_is_zero() -> None:
    world = _world("simple")
    g = experiment_grids(world)[0]
    assert eig((1.0, 0.0, 0.0, 0.0), g) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        eig(world.prior, g, "other")  # type: ignore[arg-type]


def test_active_oracle_picks_the_informative_experiment() -> None:
    world = _world("simple")
    # make experiment 2 uninformative: every class has the same mean
    means = world.means.copy()
    means[:, 2] = 0.0
    flat = World(**{**world.__dict__, "means": means})
    grids = experiment_grids(flat)
    assert eig(flat.prior, grids[2]) == pytest.approx(0.0, abs=1e-9)
    run = active_run(flat, 1, 6, np.random.default_rng(0), grids=grids)
    assert 2 not in run.experiments
    assert best_experiment(flat.prior, grids) in (0, 1)
    assert len(run.posteriors) == 7
    assert run.posteriors[-1][1] > run.posteriors[0][1]


def test_environment_episodes() -> None:
    env = envs.get("protein-world", preset="belieflens", steps=3)
    assert isinstance(env, ProteinWorld)
    eps = list(env.episodes(2, seed=7))
    assert eps == list(env.episodes(2, seed=7))
    ep = eps[0]
    assert len(ep.turns) == 4
    for t, turn in enumerate(ep.turns):
        names = sorted((p.name, p.delivery) for p in turn.probes)
        expected = {("class", "single-turn"), ("class", "multi-turn")}
        if t < 3:
            expected |= {("next-experiment", "single-turn"), ("next-experiment", "multi-turn")}
            assert f"best_experiment_{t}" in ep.truth
        assert set(names) == expected
        for p in turn.probes:
            assert len(p.queries) == len(p.labels)
            if p.name == "class":
                assert p.oracle is not None and sum(p.oracle) == pytest.approx(1.0)
            else:
                assert p.oracle is None
        assert 0 <= float(ep.truth[f"p_active_true_{t}"]) <= 1
    assert ep.truth["oracle_se_max"] == 0.0
    multi = ep.turns[3].messages["multi-turn"]
    assert len(multi) == 2 + 2 * 3
    assert "Experiment 3:" in multi[-2].content
    single = ep.turns[3].messages["single-turn"][0].content
    assert "Experiment 1:" in single and "Experiment 3:" in single


def test_environment_oracle_is_the_posterior_of_the_stated_history() -> None:
    env = ProteinWorld(ProteinWorldParams(preset="belieflens", steps=2, delivery="single-turn"))
    ep = next(env.episodes(1, seed=0))
    world = env.world(np.random.default_rng([0, 0]))
    experiments = [int(j) for j in str(ep.truth["experiments"]).split(",")]
    text = ep.turns[2].messages["single-turn"][0].content
    ys = [float(line.rsplit(" ", 1)[1].rstrip(".")) for line in text.splitlines()
          if line.startswith("Experiment ")]
    expected = posterior(world, list(zip(experiments, ys, strict=True))).probs
    oracle = ep.turns[2].probes[0].oracle
    assert oracle is not None
    assert np.allclose(oracle, expected)
    assert ep.turns[1].probes[1].labels == tuple(experiment_label(world, j) for j in range(3))


def test_hard_and_active_environment() -> None:
    env = envs.get("protein-world", preset="belieflens", difficulty="hard", steps=2,
                   mc_samples=500, sequence="active", delivery="multi-turn")
    ep = next(env.episodes(1, seed=1))
    assert float(ep.truth["oracle_se_max"]) > 0
    assert "tanh" in ep.turns[0].messages["multi-turn"][0].content


@pytest.mark.parametrize(
    ("name", "value"),
    [("classes", 1), ("classes", 11), ("attributes", 1), ("steps", -1), ("sigma", 0.0),
     ("tau", -1.0), ("mc_samples", 5), ("difficulty", "medium"), ("sequence", "greedy"),
     ("preset", "published"), ("observation", "poisson"), ("scales", "random"),
     ("truth", "first"), ("decimals", 9), ("experiments", 9)],
)
def test_bad_params(name: str, value: object) -> None:
    with pytest.raises(ParameterError, match=name):
        envs.get("protein-world", **{name: value})


def test_environment_records_eig_of_every_experiment() -> None:
    env = envs.get("protein-world", preset="belieflens", steps=2, attributes=3)
    ep = next(env.episodes(1, seed=3))
    for t in range(2):
        gains = [float(ep.truth[f"eig_{t}_{j}"]) for j in range(3)]
        assert all(g >= -1e-12 for g in gains)
        best = str(ep.truth[f"best_experiment_{t}"])
        assert best == f"measure {ATTRIBUTES[int(np.argmax(gains))]}"
    assert "eig_2_0" not in ep.truth  # no choice after the last experiment


class _Names:
    """TEST DOUBLE: a TextGenerator that answers the next-experiment MCQ with the letter of
    the option holding ``word`` (or ``reply`` verbatim when given)."""

    def __init__(self, word: str = "", reply: str = "") -> None:
        self.word, self.reply = word, reply
        self.prompts: list[str] = []

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        self.prompts.append(messages[-1].content)
        assert temperature == 0.0
        if self.reply:
            return self.reply
        line = next(x for x in messages[-1].content.splitlines() if self.word in x
                    and x[1:3] == ". ")
        return f"Answer: {line[0]}"


def test_model_mcq_sequence_votes_over_rotations_and_reports_failures() -> None:
    """The earlier choice by the next-experiment MCQ, kept as ``sequence=model-mcq``: asked
    under every rotation, so a model that names one experiment names it at every position;
    a reply naming no option (or "A protein ...", which is not the letter A) is a parse
    failure, and a step no rotation parses falls back to the seeded draw, recorded."""
    env = envs.get("protein-world", preset="belieflens", sequence="model-mcq", attributes=3,
                   steps=3)
    assert env.requires_generator  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="sequence=model-mcq"):
        next(iter(env.episodes(1, seed=0)))
    gen = _Names("folding rate")  # the third attribute: experiment 2
    (ep,) = list(env.bind_generator(gen).episodes(1, seed=0))  # type: ignore[attr-defined]
    assert ep.truth["experiments"] == "2,2,2"
    assert [ep.truth[f"choice_source_{k}"] for k in range(3)] == ["mcq"] * 3
    assert [ep.truth[f"choice_parsed_{k}"] for k in range(3)] == [3.0] * 3
    assert ep.truth["choice_votes_0"] == "0,0,3"
    assert len(gen.prompts) == 9 and "No experiments yet." in gen.prompts[0]
    assert {p.splitlines()[-4][:2] for p in gen.prompts[:3]} == {"A."}  # rotated options
    assert len({p.splitlines()[-4] for p in gen.prompts[:3]}) == 3
    assert "No experiments yet." not in gen.prompts[3]
    for bad in ("Z", "A protein with high folding rate"):
        (ep2,) = list(env.bind_generator(_Names(reply=bad)).episodes(1, seed=0))  # type: ignore[attr-defined]
        assert [ep2.truth[f"choice_source_{k}"] for k in range(3)] == ["fallback"] * 3
        assert [ep2.truth[f"choice_parsed_{k}"] for k in range(3)] == [0.0] * 3
    seeded = next(iter(envs.get("protein-world", preset="belieflens", sequence="random",
                                attributes=3, steps=3).episodes(1, seed=0)))
    assert ep2.truth["experiments"] == seeded.truth["experiments"]  # the seeded draw
