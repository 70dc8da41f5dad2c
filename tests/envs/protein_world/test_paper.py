"""ProteinWorld as published (From Prompts to Posteriors, App. A.1 and F.3): the paper's
example instance rendered as the paper writes it, the oracle of the shown result against
closed forms and brute-force Monte Carlo for every observation model, the paper's sizes
under ``preset=paper``, and bad presets refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtr
from typer.testing import CliRunner

from belieflens import envs
from belieflens.cli.main import app
from belieflens.envs.protein_world.env import ProteinWorld, describe_world, result_text
from belieflens.envs.protein_world.oracle import eig, eig_mc, experiment_grids, posterior
from belieflens.envs.protein_world.world import (
    Experiment,
    Observation,
    World,
    bernoulli_p,
    exact_text,
    generate_world,
    likelihood,
    measure,
)
from belieflens.errors import ParameterError

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "protein_world_paper.json")
                     .read_text(encoding="utf-8"))
A1 = FIXTURE["a1"]


def _a1_world(decimals: int = 4) -> World:
    """App. A.1's example instance, with the numbers as the paper states them."""
    classes = ("Xylocorein", "Thalassogen", "Nebulase", "Cryovitin")
    attrs = tuple(A1["attributes"])
    means = np.array([[float(A1["table"][a][c][0]) for a in attrs] for c in classes])
    variances = np.array([[float(A1["table"][a][c][1]) for a in attrs] for c in classes])
    experiments = tuple(Experiment(attrs.index(line.rsplit("attribute ", 1)[1].rstrip(".")),
                                   "exact") for line in A1["experiments"])
    return World(classes=classes, attributes=attrs, means=means, variances=variances,
                 prior=(0.25,) * 4, sigma=0.5, rho=0.0, difficulty="simple",
                 experiments=experiments, decimals=decimals,
                 samples=means[:, None, :], style="paper")


def test_the_example_instance_is_written_as_the_paper_writes_it() -> None:
    text = describe_world(_a1_world())
    for key in ("proteins_line", "attributes_sentence", "distribution_sentence",
                "table_sentence", "table_caption", "experiments_sentence"):
        assert A1[key] in text, key
    for line in A1["experiments"]:
        assert f"- {line}" in text
    assert "a = [" + ", ".join(A1["attributes"]) + "]" in text
    rows = text.splitlines()
    for attr, by_class in A1["table"].items():
        for cls, (mean, var) in by_class.items():
            assert f"{attr} | {cls} | {mean} | {var}" in rows  # the paper's digits, exactly
    assert FIXTURE["f32_prior_sentence"] + " Xylocorein: 0.25, Thalassogen: 0.25" in text


def test_the_example_oracle_is_the_closed_form_of_the_shown_value() -> None:
    """y = the exact attribute value shown to 4 decimals: the likelihood is the probability
    of its rounding interval under N(mu, var), computed by hand with the normal cdf."""
    world = _a1_world()
    h = 0.5e-4
    history = [(0, 0.9123), (2, -0.35)]  # Helix-Torsion Index, then Fold-Elasticity Coefficient
    by_hand = np.full(4, 0.25)
    for j, y in history:
        a = world.experiments[j].attribute
        mu, sd = world.means[:, a], np.sqrt(world.variances[:, a])
        hi, lo = (y + h - mu) / sd, (y - h - mu) / sd
        # Phi(hi) - Phi(lo), taken in the lower tail where it does not cancel
        by_hand = by_hand * np.where(lo > 0, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))
    by_hand /= by_hand.sum()
    post = posterior(world, history)
    assert np.allclose(post.probs, by_hand, rtol=1e-9, atol=1e-20)
    assert post.se == (0.0,) * 4
    # with 4 decimals the interval and the density at the shown value give the same posterior
    dens = np.full(4, 0.25)
    for j, y in history:
        a = world.experiments[j].attribute
        mu, sd = world.means[:, a], np.sqrt(world.variances[:, a])
        dens = dens * np.exp(-0.5 * ((y - mu) / sd) ** 2) / sd
    assert np.allclose(post.probs, dens / dens.sum(), rtol=1e-6)
    # the prompt states the result with the digits the oracle conditions on
    assert result_text(world, 1, 0, 0.9123).endswith("Result: 0.9123.")
    assert result_text(world, 2, 2, -0.35).endswith("Result: -0.3500.")


def _simple_world(obs: Observation, difficulty: str = "simple", decimals: int = 1,
                  samples: int = 2000) -> World:
    return generate_world(np.random.default_rng(5), classes=3, attributes=3,
                          difficulty=difficulty, spread=1.0, tau=1.0, sigma=0.7,  # type: ignore[arg-type]
                          rho=1.5, mc_samples=samples, uniform_prior=True, style="paper",
                          experiments=3, observation=obs, decimals=decimals)


def _z_scores(counts: np.ndarray, p: np.ndarray, n: int,
              se: np.ndarray | None = None) -> np.ndarray:
    """z of each observed frequency against ``p``; values expected fewer than 10 times are
    pooled into one cell (a binomial z is meaningless for a rare tail value)."""
    se = np.zeros_like(p) if se is None else se
    big = n * p >= 10
    obs = np.append(counts[big] / n, counts[~big].sum() / n)
    exp = np.append(p[big], p[~big].sum())
    var = np.append(se[big] ** 2, np.sum(se[~big] ** 2)) + exp * (1 - exp) / n
    return np.asarray((obs - exp) / np.sqrt(np.where(var > 0, var, 1.0)))


@pytest.mark.parametrize("obs", ["exact", "gaussian", "uniform", "bernoulli"])
def test_shown_results_are_distributed_as_the_oracle_says(obs: Observation) -> None:
    """Brute force: simulate fresh proteins of one class, round as the prompt does, and
    compare the frequency of every shown value with the oracle's likelihood of it."""
    world = _simple_world(obs)
    rng = np.random.default_rng(0)
    n = 6000
    cls, j = 1, 0
    draws = np.array([measure(world, cls, j, rng) for _ in range(n)])
    values, counts = np.unique(draws, return_counts=True)
    p = np.array([likelihood(world, j, float(v)).value[cls] for v in values])
    z = _z_scores(counts, p, n)
    assert np.all(np.abs(z) < 5), (obs, z)
    # the likelihood sums to 1 over every value the prompt could show
    step = 10.0 ** -world.decimals
    grid = [0.0, 1.0] if obs == "bernoulli" else np.round(np.arange(-12, 12 + step / 2, step), 1)
    total = sum(likelihood(world, j, float(y)).value for y in grid)
    assert np.allclose(total, 1.0, atol=1e-9)


@pytest.mark.parametrize("obs", ["gaussian", "uniform", "bernoulli", "exact"])
def test_hard_world_likelihood_against_fresh_simulation(obs: Observation) -> None:
    """Hard worlds: the Rao-Blackwellised Monte Carlo likelihood of the second attribute
    (which depends on the first through tanh) against fresh simulated proteins."""
    world = _simple_world(obs, difficulty="hard", samples=4000)
    j = next(e for e, ex in enumerate(world.experiments) if ex.attribute > 0)
    rng = np.random.default_rng(1)
    n = 5000
    draws = np.array([measure(world, 0, j, rng) for _ in range(n)])
    values, counts = np.unique(draws, return_counts=True)
    lks = [likelihood(world, j, float(v)) for v in values]
    p = np.array([lk.value[0] for lk in lks])
    se_mc = np.array([lk.se[0] for lk in lks])
    z = _z_scores(counts, p, n, se_mc)
    assert np.all(np.abs(z) < 5), (obs, z)
    assert all(lk.rel_se[0] > 0 for lk in lks)


def test_bernoulli_quadrature_against_monte_carlo() -> None:
    rng = np.random.default_rng(2)
    for m, s in ((0.0, 1.0), (1.3, 0.4), (-2.0, 2.5)):
        a = m + s * rng.standard_normal(400_000)
        mc = 1 / (1 + np.exp(-a))
        assert abs(float(bernoulli_p(np.array(m), np.array(s))) - mc.mean()) < 5 * mc.std() / 633
    assert float(bernoulli_p(np.array(0.0), np.array(3.0))) == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("obs", ["exact", "uniform", "bernoulli"])
def test_eig_grid_matches_monte_carlo_for_each_model(obs: Observation) -> None:
    world = _simple_world(obs, decimals=4)
    grids = experiment_grids(world)
    for j, g in enumerate(grids):
        a, b = eig(world.prior, g, "entropy"), eig(world.prior, g, "kl")
        assert a == pytest.approx(b, abs=1e-7)
        value, se = eig_mc(world, world.prior, j, np.random.default_rng(j), n=1500)
        assert abs(a - value) < 5 * se + 1e-3


def test_paper_preset_has_the_papers_sizes_and_each_class_once_per_world() -> None:
    env = envs.get("protein-world", delivery="single-turn", sequence="random", stated="off")
    assert isinstance(env, ProteinWorld)
    p = env.params
    sizes = FIXTURE["sizes"]
    assert (p.preset, p.classes, p.attributes, p.experiments, p.steps) == (
        "paper", sizes["classes"], sizes["attributes"], sizes["experiments"], sizes["T"])
    assert (p.observation, p.scales, p.prior, p.truth, p.decimals) == (
        "exact", "drawn", "uniform", "each-class", 4)
    eps = list(env.episodes(9, seed=3))
    assert [int(float(e.truth["theta_index"])) for e in eps] == [*range(8), 0]
    intros = [e.turns[0].messages["single-turn"][0].content for e in eps]
    assert len(set(intros[:8])) == 1 and intros[8] != intros[0]  # one world per 8 episodes
    assert [e.truth["world"] for e in eps] == [0.0] * 8 + [1.0]
    world = env.world(np.random.default_rng([3, 0, 1]))
    assert len(world.experiments) == 6 and len({e.attribute for e in world.experiments}) == 6
    assert np.all(world.variances >= 0.1)
    assert np.all(world.variances == np.round(world.variances, 4))
    assert np.all(world.means == np.round(world.means, 4))
    for e in eps[:2]:
        assert len(e.turns) == sizes["T"] + 1
    text = intros[0]
    for c in range(8):  # every stated parameter is the parameter used, to its last digit
        for i in range(8):
            assert (f"{world.attributes[i]} | {world.classes[c]} | {world.means[c, i]:.4f} | "
                    f"{world.variances[c, i]:.4f}") in text
    hard = envs.get("protein-world", difficulty="hard", mc_samples=200, steps=1,
                    delivery="single-turn", sequence="random", stated="off")
    assert hard.params.observation == "mixed"  # type: ignore[attr-defined]
    # F.3.1 draws the hard worlds' standard deviations, the simple ones' variances
    assert hard.params.scales == "drawn-sd"  # type: ignore[attr-defined]
    assert isinstance(hard, ProteinWorld)
    sds = hard.world(np.random.default_rng([0, 0, 1])).sds
    assert np.all(sds >= 0.1 - 1e-3) and np.any(sds ** 2 < 0.1)  # a variance below 0.1
    (ep,) = list(hard.episodes(1, seed=0))
    assert ep.truth["observations"] == "gaussian,uniform,bernoulli,gaussian,uniform,bernoulli"
    assert "ρ = 1.5" in ep.turns[0].messages["single-turn"][0].content


def test_the_earlier_variant_stays_reachable_by_name() -> None:
    p = envs.get("protein-world", preset="belieflens").params
    assert (p.classes, p.attributes, p.experiments, p.steps, p.observation, p.scales,  # type: ignore[attr-defined]
            p.prior, p.truth, p.decimals) == (4, 3, 3, 5, "gaussian", "fixed", "random",  # type: ignore[attr-defined]
                                             "prior", 2)
    # a preset's value is overridden by an explicit one
    q = envs.get("protein-world", preset="paper", classes=3, observation="uniform").params
    assert (q.classes, q.observation, q.attributes) == (3, "uniform", 8)  # type: ignore[attr-defined]


def test_numbers_are_written_exactly() -> None:
    assert exact_text(0.1 + 0.2) == "0.30000000000000004"
    assert exact_text(1.5) == "1.5" and exact_text(-0.0) == "0" and exact_text(1e-7) == "0.0000001"
    env = envs.get("protein-world", preset="belieflens", sigma=0.123456789, tau=1.23456789,
                   delivery="single-turn", steps=1)
    text = next(iter(env.episodes(1, seed=0))).turns[0].messages["single-turn"][0].content
    assert "standard deviation 1.23456789" in text and "deviation 0.123456789" in text


@pytest.mark.parametrize("setting", ["preset=published", "observation=poisson", "unparsed=drop"])
def test_unknown_preset_observation_model_or_reply_policy_exits_2_and_writes_nothing(
    tmp_path: Path, setting: str
) -> None:
    out = tmp_path / "study.h5"
    result = CliRunner().invoke(app, ["extract", "protein-world", "--set", setting,
                                      "--out", str(out)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert setting.split("=")[0] in lines[0]
    assert not any(tmp_path.iterdir())
    with pytest.raises(ParameterError):
        envs.get("protein-world", **dict([setting.split("=")]))
