"""ProteinWorld worlds: seeded fictional protein classes, their attributes and likelihoods.

A world has ``K`` classes, each with a mean for each of ``J`` continuous
attributes. Every experiment takes a fresh protein of the (unknown) true class
and measures one attribute with Gaussian noise ``sigma``, so observations are
independent given the class.

- ``simple``: attributes are Gaussian around the class means (sd ``tau``); the
  likelihood of a measurement is ``N(y; mu, tau^2 + sigma^2)`` in closed form.
- ``hard``: attributes are autoregressive,
  ``a_1 = mu_1 + tau * e_1`` and ``a_j = mu_j + rho * tanh(a_{j-1}) + tau * e_j``;
  the likelihood has no closed form and is estimated by Monte Carlo from a fixed
  set of ``S`` simulated proteins per class, with its standard error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from jaxtyping import Float

Difficulty = Literal["simple", "hard"]
"""How attributes are generated: independent Gaussians or an autoregressive chain."""

ATTRIBUTES = (
    "thermal stability",
    "binding affinity",
    "folding rate",
    "surface charge",
    "solubility",
    "half-life",
    "aggregation tendency",
    "hydrophobicity",
)
"""Attribute names; a world with ``J`` attributes uses the first ``J``."""

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "th")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "n", "r", "l", "s")
_SUFFIXES = ("in", "ase", "ulin", "orin", "exin", "amin", "olase", "idin")


@dataclass(frozen=True)
class World:
    """One generated world.

    Attributes:
        classes: fictional class names, indexed by class.
        attributes: attribute names, indexed by experiment.
        means: class mean of each attribute, ``[class, attribute]`` (rounded to 0.1).
        prior: prior over classes (whole percentages, as stated to the model).
        tau: within-class sd of every attribute.
        sigma: measurement noise sd.
        rho: autoregressive coupling (``hard`` only; 0 for ``simple``).
        difficulty: ``simple`` or ``hard``.
        samples: the fixed simulated proteins for Monte Carlo, ``[class, sample, attribute]``.
    """

    classes: tuple[str, ...]
    attributes: tuple[str, ...]
    means: Float[np.ndarray, "outcome attribute"]
    prior: tuple[float, ...]
    tau: float
    sigma: float
    rho: float
    difficulty: Difficulty
    samples: Float[np.ndarray, "outcome sample attribute"]


@dataclass(frozen=True)
class Likelihood:
    """The likelihood of one measurement under every class, with its Monte Carlo error.

    Held in log space so that far-out measurements do not underflow.

    Attributes:
        log_value: ``log p(y | class, experiment)`` per class.
        rel_se: standard error of the likelihood relative to its value (0 where exact).
    """

    log_value: Float[np.ndarray, " outcome"]
    rel_se: Float[np.ndarray, " outcome"]

    @property
    def value(self) -> np.ndarray:
        """``p(y | class, experiment)`` per class."""
        return np.asarray(np.exp(self.log_value))

    @property
    def se(self) -> np.ndarray:
        """Standard error of :attr:`value` per class."""
        return np.asarray(self.value * self.rel_se)


def fictional_names(k: int, rng: np.random.Generator) -> tuple[str, ...]:
    """``k`` distinct capitalised fictional protein names, e.g. ``Vorulin``."""
    names: list[str] = []
    while len(names) < k:
        n_syl = int(rng.integers(1, 3))
        stem = "".join(
            str(rng.choice(_ONSETS)) + str(rng.choice(_VOWELS)) + str(rng.choice(_CODAS))
            for _ in range(n_syl)
        )
        name = (stem + str(rng.choice(_SUFFIXES))).capitalize()
        if name not in names:
            names.append(name)
    return tuple(names)


def percent_prior(weights: Float[np.ndarray, " outcome"]) -> tuple[float, ...]:
    """Round a distribution to whole percentages (each at least 1%) that sum to 100."""
    w = np.asarray(weights, dtype=np.float64)
    k = len(w)
    raw = 1.0 + w / w.sum() * (100 - k)
    pct = np.floor(raw).astype(np.int64)
    short = 100 - int(pct.sum())
    pct[np.argsort(-(raw - pct), kind="stable")[:short]] += 1
    return tuple(float(x) / 100 for x in pct)


def simulate(
    means: Float[np.ndarray, "outcome attribute"],
    tau: float,
    rho: float,
    noise: Float[np.ndarray, "sample attribute"],
) -> Float[np.ndarray, "outcome sample attribute"]:
    """Attributes of simulated proteins of every class from standard normal ``noise``.

    ``a_1 = mu_1 + tau e_1``, ``a_j = mu_j + rho tanh(a_{j-1}) + tau e_j`` (``rho = 0``
    gives independent Gaussian attributes).
    """
    mu = np.asarray(means, dtype=np.float64)[:, None, :]
    e = np.asarray(noise, dtype=np.float64)[None, :, :]
    a = np.empty((mu.shape[0], e.shape[1], mu.shape[2]))
    for j in range(mu.shape[2]):
        drift = rho * np.tanh(a[:, :, j - 1]) if j else 0.0
        a[:, :, j] = mu[:, :, j] + drift + tau * e[:, :, j]
    return a


def generate_world(
    rng: np.random.Generator,
    *,
    classes: int,
    attributes: int,
    difficulty: Difficulty,
    spread: float,
    tau: float,
    sigma: float,
    rho: float,
    mc_samples: int,
    uniform_prior: bool,
) -> World:
    """Draw a world: names, class means ``N(0, spread^2)`` rounded to 0.1, a prior, MC samples."""
    names = fictional_names(classes, rng)
    means = np.round(rng.normal(0.0, spread, size=(classes, attributes)), 1)
    weights = np.ones(classes) if uniform_prior else rng.dirichlet(np.full(classes, 2.0))
    prior = percent_prior(weights)
    r = rho if difficulty == "hard" else 0.0
    noise = rng.standard_normal((mc_samples, attributes))
    return World(
        classes=names,
        attributes=ATTRIBUTES[:attributes],
        means=means,
        prior=prior,
        tau=tau,
        sigma=sigma,
        rho=r,
        difficulty=difficulty,
        samples=simulate(means, tau, r, noise),
    )


def measure(world: World, cls: int, experiment: int, rng: np.random.Generator) -> float:
    """One measurement of ``experiment`` on a fresh protein of class ``cls``."""
    a = simulate(world.means[cls : cls + 1], world.tau, world.rho,
                 rng.standard_normal((1, len(world.attributes))))
    return float(a[0, 0, experiment] + world.sigma * rng.standard_normal())


_LOG_SQRT_2PI = 0.5 * float(np.log(2.0 * np.pi))


def _normal_logpdf(x: np.ndarray, sd: float) -> np.ndarray:
    return np.asarray(-0.5 * (x / sd) ** 2 - np.log(sd) - _LOG_SQRT_2PI)


def _normal_pdf(x: np.ndarray, sd: float) -> np.ndarray:
    return np.asarray(np.exp(_normal_logpdf(x, sd)))


def likelihood_exact(world: World, experiment: int, y: float) -> Likelihood:
    """Closed-form likelihood ``N(y; mu, tau^2 + sigma^2)`` (``simple`` worlds only)."""
    if world.difficulty != "simple":
        raise ValueError("the closed-form likelihood exists only for simple worlds")
    sd = float(np.hypot(world.tau, world.sigma))
    log_value = _normal_logpdf(y - world.means[:, experiment], sd)
    return Likelihood(log_value, np.zeros_like(log_value))


def likelihood_mc(world: World, experiment: int, y: float) -> Likelihood:
    """Monte Carlo likelihood: mean of ``N(y; a_j, sigma^2)`` over the world's fixed samples.

    Unbiased for every world; for ``simple`` worlds it estimates the closed form.
    """
    lk = _normal_logpdf(y - world.samples[:, :, experiment], world.sigma)  # class sample
    m = lk.max(axis=1, keepdims=True)
    w = np.exp(lk - m)
    mean = w.mean(axis=1)
    rel_se = w.std(axis=1, ddof=1) / (mean * np.sqrt(w.shape[1]))
    return Likelihood(np.log(mean) + m[:, 0], rel_se)


def likelihood(world: World, experiment: int, y: float) -> Likelihood:
    """The oracle's likelihood: exact for ``simple`` worlds, Monte Carlo for ``hard``."""
    if world.difficulty == "simple":
        return likelihood_exact(world, experiment, y)
    return likelihood_mc(world, experiment, y)


def likelihood_grid(
    world: World, experiment: int, grid: Float[np.ndarray, " y"]
) -> Float[np.ndarray, "outcome y"]:
    """The oracle's likelihood of every grid value under every class, ``[class, y]``."""
    g = np.asarray(grid, dtype=np.float64)
    if world.difficulty == "simple":
        sd = float(np.hypot(world.tau, world.sigma))
        return _normal_pdf(g[None, :] - world.means[:, experiment, None], sd)
    a = world.samples[:, :, experiment]  # class sample
    return np.asarray(_normal_pdf(g[None, None, :] - a[:, :, None], world.sigma).mean(axis=1))


def measurement_grid(world: World, experiment: int, step_per_sd: int = 8) -> np.ndarray:
    """An even grid of measurement values covering every class's likelihood mass."""
    a = world.samples[:, :, experiment]
    sd = world.sigma if world.difficulty == "hard" else float(np.hypot(world.tau, world.sigma))
    lo = min(float(a.min()), float(world.means[:, experiment].min())) - 8.0 * sd
    hi = max(float(a.max()), float(world.means[:, experiment].max())) + 8.0 * sd
    n = int(np.ceil((hi - lo) / (sd / step_per_sd))) + 1
    return np.linspace(lo, hi, n)
