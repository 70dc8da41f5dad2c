"""ProteinWorld worlds: seeded fictional protein classes, their attributes and likelihoods.

A world has ``K`` classes; a protein of class ``c`` has ``J`` continuous latent
attributes. Attribute ``i`` of class ``c`` has mean ``mu[c, i]`` and variance
``var[c, i]``:

- ``simple``: attributes are independent, ``a_i ~ N(mu_ci, var_ci)``;
- ``hard``: attributes are autoregressive, ``a_1 ~ N(mu_c1, var_c1)`` and
  ``a_i | a_{i-1} ~ N(mu_ci + rho tanh(a_{i-1}), var_ci)``.

Each of the world's experiments takes a fresh protein of the (unknown) true
class and observes one attribute ``a`` through an observation model
(From Prompts to Posteriors, App. F.3.1):

- ``exact``: the attribute's value, ``y = a``;
- ``gaussian``: ``y ~ N(a, sigma^2)``;
- ``uniform``: ``y ~ Uniform(a - sigma, a + sigma)``;
- ``bernoulli``: ``y ~ Bernoulli(sigmoid(a))`` (a result of 1 or 0).

Continuous results are shown rounded to ``decimals`` decimals, and the oracle's
likelihood is that of what is shown: the probability that the result rounds to the
shown value, ``P(y in [shown - h, shown + h] | class)`` with ``h`` half a unit of
the last decimal (Simpson's rule on the smooth density: exact to double precision
at the widths used). Given the previous attribute, ``a_i`` is Gaussian, so every
continuous likelihood is a closed form in the conditional mean; the Bernoulli's
``E[sigmoid(a)]`` is integrated by 64-point Gauss-Hermite quadrature. ``simple``
worlds are therefore exact; ``hard`` worlds average the closed form over a fixed
set of ``S`` simulated previous attributes per class (Rao-Blackwellised Monte
Carlo), with its standard error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from jaxtyping import Float
from scipy.special import log_ndtr, ndtr

Difficulty = Literal["simple", "hard"]
"""How attributes are generated: independent Gaussians or an autoregressive chain."""

Observation = Literal["exact", "gaussian", "uniform", "bernoulli"]
"""How one experiment observes its attribute."""

MIXED: tuple[Observation, ...] = ("gaussian", "uniform", "bernoulli")
"""The noisy observation models experiments cycle through under ``observation=mixed``."""

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
"""Attribute names of the ``belieflens`` preset (a world with ``J`` attributes: the first ``J``)."""

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "th")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "n", "r", "l", "s")
_SUFFIXES = ("in", "ase", "ulin", "orin", "exin", "amin", "olase", "idin")

_ATTR_FIRST = ("Fold", "Helix", "Ligand", "Chiro", "Allo", "Zymo", "Membrane", "Redox", "Torsion",
               "Charge", "Lattice", "Chaperone", "Glyco", "Proto", "Steric", "Kinase")
_ATTR_SECOND = ("Elasticity", "Torsion", "Permeability", "Resonance", "Degradation", "Binding",
                "Folding", "Coupling", "Drift", "Affinity", "Stability", "Flux")
_ATTR_KIND = ("Coefficient", "Index", "Score", "Factor", "Propensity", "Ratio")

_GH_X, _GH_W = np.polynomial.hermite.hermgauss(64)


@dataclass(frozen=True)
class Experiment:
    """One available experiment: the attribute it observes and how.

    Attributes:
        attribute: index of the observed attribute.
        observation: the observation model.
    """

    attribute: int
    observation: Observation


@dataclass(frozen=True)
class World:
    """One generated world.

    Attributes:
        classes: fictional class names, indexed by class.
        attributes: attribute names, indexed by attribute.
        means: mean of each attribute per class, ``[class, attribute]`` (as stated).
        variances: variance of each attribute per class, ``[class, attribute]`` (as stated).
        prior: prior over classes (as stated to the model).
        sigma: the noise parameter of the ``gaussian`` and ``uniform`` observation models.
        rho: autoregressive coupling (``hard`` only; 0 for ``simple``).
        difficulty: ``simple`` or ``hard``.
        experiments: the available experiments, indexed by experiment.
        decimals: continuous results are shown rounded to this many decimals.
        samples: the fixed simulated proteins for Monte Carlo, ``[class, sample, attribute]``.
        style: how the world is written to the model: as App. A.1 of the paper writes it
            (``paper``), or the earlier ``belieflens`` text.
    """

    classes: tuple[str, ...]
    attributes: tuple[str, ...]
    means: Float[np.ndarray, "outcome attribute"]
    variances: Float[np.ndarray, "outcome attribute"]
    prior: tuple[float, ...]
    sigma: float
    rho: float
    difficulty: Difficulty
    experiments: tuple[Experiment, ...]
    decimals: int
    samples: Float[np.ndarray, "outcome sample attribute"]
    style: Literal["paper", "belieflens"] = "belieflens"

    @property
    def sds(self) -> np.ndarray:
        """Standard deviation of each attribute per class, ``[class, attribute]``."""
        return np.asarray(np.sqrt(self.variances))

    @property
    def half_width(self) -> float:
        """Half a unit of the last shown decimal: a shown result ``y`` stands for
        ``[y - h, y + h]``."""
        return 0.5 * 10.0 ** (-self.decimals)


@dataclass(frozen=True)
class Likelihood:
    """The likelihood of one shown result under every class, with its Monte Carlo error.

    Held in log space so that far-out results do not underflow.

    Attributes:
        log_value: ``log p(shown y | class, experiment)`` per class.
        rel_se: standard error of the likelihood relative to its value (0 where exact).
    """

    log_value: Float[np.ndarray, " outcome"]
    rel_se: Float[np.ndarray, " outcome"]

    @property
    def value(self) -> np.ndarray:
        """``p(shown y | class, experiment)`` per class."""
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


def fictional_attributes(k: int, rng: np.random.Generator) -> tuple[str, ...]:
    """``k`` distinct fictional attribute names, e.g. ``Fold-Elasticity Coefficient``."""
    names: list[str] = []
    while len(names) < k:
        first, second = str(rng.choice(_ATTR_FIRST)), str(rng.choice(_ATTR_SECOND))
        if first == second:
            continue
        name = f"{first}-{second} {rng.choice(_ATTR_KIND)}"
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


def exact_text(x: float) -> str:
    """``x`` written exactly: the shortest decimal that reads back as the same float
    (``0.5``, ``1.2345``, ``-0.1``; never exponent notation, never ``:g`` rounding)."""
    s = np.format_float_positional(float(x), trim="-")
    return "0" if s in ("-0", "0") else s


def simulate(
    means: Float[np.ndarray, "outcome attribute"],
    sds: Float[np.ndarray, "outcome attribute"],
    rho: float,
    noise: Float[np.ndarray, "sample attribute"],
) -> Float[np.ndarray, "outcome sample attribute"]:
    """Attributes of simulated proteins of every class from standard normal ``noise``.

    ``a_1 = mu_1 + sd_1 e_1``, ``a_i = mu_i + rho tanh(a_{i-1}) + sd_i e_i`` (``rho = 0``
    gives independent Gaussian attributes).
    """
    mu = np.asarray(means, dtype=np.float64)[:, None, :]
    sd = np.asarray(sds, dtype=np.float64)[:, None, :]
    e = np.asarray(noise, dtype=np.float64)[None, :, :]
    a = np.empty((mu.shape[0], e.shape[1], mu.shape[2]))
    for j in range(mu.shape[2]):
        drift = rho * np.tanh(a[:, :, j - 1]) if j else 0.0
        a[:, :, j] = mu[:, :, j] + drift + sd[:, :, j] * e[:, :, j]
    return a


def observation_models(
    observation: Literal["exact", "gaussian", "uniform", "bernoulli", "mixed"], n: int
) -> tuple[Observation, ...]:
    """The observation model of each of ``n`` experiments (``mixed`` cycles through
    :data:`MIXED`)."""
    if observation == "mixed":
        return tuple(MIXED[k % len(MIXED)] for k in range(n))
    return (observation,) * n


def generate_world(rng: np.random.Generator, *, classes: int, attributes: int,
                   difficulty: Difficulty, spread: float, tau: float, sigma: float, rho: float,
                   mc_samples: int, uniform_prior: bool,
                   style: Literal["paper", "belieflens"] = "belieflens",
                   scales: Literal["drawn", "drawn-sd", "fixed"] | None = None,
                   experiments: int | None = None,
                   observation: Literal["exact", "gaussian", "uniform", "bernoulli",
                                        "mixed"] = "gaussian",
                   decimals: int = 2) -> World:
    """Draw a world.

    ``belieflens`` style: the listed attribute names, class means ``N(0, spread^2)``
    rounded to 0.1, one experiment per attribute in order (the first ``experiments``).
    ``paper`` style (App. F.3.1): fictional attribute names, means ``N(0, spread^2)``
    rounded to 4 decimals, and ``experiments`` distinct attributes drawn as the
    experiments. Variances (``scales``; default ``drawn`` for ``paper``, ``fixed`` for
    ``belieflens``): ``0.1 + |N(0, 1)|`` per class and attribute rounded to 4 decimals
    (``drawn-sd``: the sd is ``0.1 + |N(0, 1)|``, as App. A.1's example instance, with
    variances below 0.1, was evidently drawn), or ``tau^2`` (the values stated are the
    values used). Then a prior (uniform, or
    Dirichlet(2) in whole percentages) and the Monte Carlo samples.
    """
    how = ("drawn" if style == "paper" else "fixed") if scales is None else scales
    n_exp = attributes if experiments is None else experiments
    if not 1 <= n_exp <= attributes:
        raise ValueError("experiments must be in 1..attributes")
    names = fictional_names(classes, rng)
    if style == "paper":
        attr_names = fictional_attributes(attributes, rng)
        means = np.round(rng.normal(0.0, spread, size=(classes, attributes)), 4)
    else:
        attr_names = ATTRIBUTES[:attributes]
        means = np.round(rng.normal(0.0, spread, size=(classes, attributes)), 1)
    if how == "drawn":
        variances = np.round(0.1 + np.abs(rng.standard_normal((classes, attributes))), 4)
    elif how == "drawn-sd":
        variances = np.round((0.1 + np.abs(rng.standard_normal((classes, attributes)))) ** 2, 4)
    else:
        variances = np.full((classes, attributes), tau * tau)
    if style == "paper":
        observed = [int(i) for i in rng.choice(attributes, size=n_exp, replace=False)]
    else:
        observed = list(range(n_exp))
    weights = np.ones(classes) if uniform_prior else rng.dirichlet(np.full(classes, 2.0))
    prior = (tuple(1.0 / classes for _ in range(classes)) if uniform_prior and style == "paper"
             else percent_prior(weights))
    r = rho if difficulty == "hard" else 0.0
    noise = rng.standard_normal((mc_samples, attributes))
    models = observation_models(observation, n_exp)
    return World(classes=names, attributes=attr_names, means=means, variances=variances,
                 prior=prior, sigma=sigma, rho=r, difficulty=difficulty,
                 experiments=tuple(Experiment(i, o) for i, o in zip(observed, models, strict=True)),
                 decimals=decimals, samples=simulate(means, np.sqrt(variances), r, noise),
                 style=style)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)))


def observe(world: World, experiment: int, a: float, rng: np.random.Generator) -> float:
    """The shown result of ``experiment`` on a protein whose observed attribute is ``a``."""
    obs = world.experiments[experiment].observation
    if obs == "bernoulli":
        return float(rng.random() < float(_sigmoid(np.asarray(a))))
    if obs == "gaussian":
        y = a + world.sigma * float(rng.standard_normal())
    elif obs == "uniform":
        y = a + world.sigma * float(rng.uniform(-1.0, 1.0))
    else:
        y = a
    return round(y, world.decimals)


def measure(world: World, cls: int, experiment: int, rng: np.random.Generator) -> float:
    """The shown result of ``experiment`` on a fresh protein of class ``cls``."""
    a = simulate(world.means[cls : cls + 1], world.sds[cls : cls + 1], world.rho,
                 rng.standard_normal((1, len(world.attributes))))
    return observe(world, experiment, float(a[0, 0, world.experiments[experiment].attribute]), rng)


_LOG_SQRT_2PI = 0.5 * float(np.log(2.0 * np.pi))


def _normal_logpdf(x: np.ndarray, sd: np.ndarray | float) -> np.ndarray:
    return np.asarray(-0.5 * (x / sd) ** 2 - np.log(sd) - _LOG_SQRT_2PI)


def _log_ndtr_diff(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """``log(Phi(hi) - Phi(lo))`` for ``hi > lo``, stable in both tails."""
    flip = lo > 0  # both in the upper tail: Phi(hi) - Phi(lo) = Phi(-lo) - Phi(-hi)
    a = np.where(flip, -lo, hi)
    b = np.where(flip, -hi, lo)
    la, lb = log_ndtr(a), log_ndtr(b)
    return np.asarray(la + np.log1p(-np.exp(np.minimum(lb - la, 0.0))))


def conditional_log_density(
    observation: Observation, y: np.ndarray, m: np.ndarray, s: np.ndarray, sigma: float
) -> np.ndarray:
    """``log p(y | a ~ N(m, s^2))`` of a continuous observation model (broadcasting)."""
    if observation == "exact":
        return _normal_logpdf(y - m, s)
    if observation == "gaussian":
        return _normal_logpdf(y - m, np.sqrt(s * s + sigma * sigma))
    if observation == "uniform":
        hi = (y + sigma - m) / s
        lo = (y - sigma - m) / s
        return np.asarray(_log_ndtr_diff(hi, lo) - np.log(2.0 * sigma))
    raise ValueError(f"{observation!r} has no density")


def bernoulli_p(m: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``E[sigmoid(a)]`` for ``a ~ N(m, s^2)`` by 64-point Gauss-Hermite quadrature."""
    mm, ss = np.broadcast_arrays(np.asarray(m, dtype=np.float64), np.asarray(s, dtype=np.float64))
    a = mm[..., None] + np.sqrt(2.0) * ss[..., None] * _GH_X
    return np.asarray(np.clip((_sigmoid(a) * _GH_W).sum(-1) / np.sqrt(np.pi), 0.0, 1.0))


def conditional_log_likelihood(
    observation: Observation, y: float, m: np.ndarray, s: np.ndarray, sigma: float, h: float
) -> np.ndarray:
    """``log P(shown y | a ~ N(m, s^2))``: Bernoulli mass, or the probability of the
    rounding interval ``[y - h, y + h]`` (Simpson's rule on the density)."""
    if observation == "bernoulli":
        p = bernoulli_p(m, s)
        q = p if y >= 0.5 else 1.0 - p
        return np.asarray(np.log(np.where(q > 0, q, np.finfo(float).tiny)))
    parts = [conditional_log_density(observation, np.asarray(y + d), m, s, sigma)
             for d in (-h, 0.0, h)]
    stacked = np.stack(parts) + np.log([1.0, 4.0, 1.0])[(...,) + (None,) * np.ndim(parts[0])]
    top = stacked.max(axis=0)
    return np.asarray(top + np.log(np.exp(stacked - top).sum(axis=0)) + np.log(2.0 * h / 6.0))


def conditional_means(world: World, attribute: int) -> np.ndarray:
    """Mean of attribute ``attribute`` given the previous one, ``[class, sample]``
    (one column for ``simple`` worlds, where it is the class mean)."""
    mu = world.means[:, attribute][:, None]
    if world.difficulty == "simple" or attribute == 0 or world.rho == 0.0:
        return np.asarray(mu)
    return np.asarray(mu + world.rho * np.tanh(world.samples[:, :, attribute - 1]))


def likelihood(world: World, experiment: int, y: float) -> Likelihood:
    """The oracle's likelihood of the shown result ``y`` of ``experiment`` under every class.

    Exact for ``simple`` worlds (and for the first attribute of a ``hard`` one);
    otherwise the mean of the exact conditional likelihood over the world's
    simulated previous attributes, with its relative standard error.
    """
    ex = world.experiments[experiment]
    m = conditional_means(world, ex.attribute)
    s = world.sds[:, ex.attribute][:, None]
    lk = conditional_log_likelihood(ex.observation, y, m, s, world.sigma, world.half_width)
    lk = np.broadcast_to(lk, m.shape)
    if m.shape[1] == 1:
        return Likelihood(np.asarray(lk[:, 0]), np.zeros(m.shape[0]))
    top = lk.max(axis=1, keepdims=True)
    w = np.exp(lk - top)
    mean = w.mean(axis=1)
    rel_se = w.std(axis=1, ddof=1) / (mean * np.sqrt(w.shape[1]))
    return Likelihood(np.log(mean) + top[:, 0], rel_se)


def likelihood_exact(world: World, experiment: int, y: float) -> Likelihood:
    """The closed-form likelihood (``simple`` worlds only)."""
    if world.difficulty != "simple":
        raise ValueError("the closed-form likelihood exists only for simple worlds")
    return likelihood(world, experiment, y)


def likelihood_mc(world: World, experiment: int, y: float) -> Likelihood:
    """Plain Monte Carlo likelihood: the mean over the world's fixed simulated proteins of
    the shown result's likelihood given the protein's full attribute value.

    Unbiased for every world and observation model except ``exact`` (a point mass
    given the attribute, scored by the rounding interval of width ``2h``, so the
    estimate is a rare-event count); a cross-check of :func:`likelihood`.
    """
    ex = world.experiments[experiment]
    a = world.samples[:, :, ex.attribute]
    h = world.half_width
    if ex.observation == "bernoulli":
        p = _sigmoid(a)
        lk = np.log(np.maximum(p if y >= 0.5 else 1.0 - p, np.finfo(float).tiny))
    elif ex.observation == "exact":
        inside = np.abs(a - y) <= h
        lk = np.where(inside, 0.0, -np.inf)
    else:
        lk = conditional_log_likelihood(ex.observation, y, a, _point(a), world.sigma, h)
    top = np.max(lk, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    w = np.exp(lk - top)
    mean = w.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_se = w.std(axis=1, ddof=1) / (mean * np.sqrt(w.shape[1]))
        log_mean = np.log(mean) + top[:, 0]
    return Likelihood(log_mean, rel_se)


def _point(a: np.ndarray) -> np.ndarray:
    """A vanishing attribute sd: the observation given the attribute's exact value."""
    return np.full_like(a, 1e-12)


def likelihood_grid(
    world: World, experiment: int, grid: Float[np.ndarray, " y"]
) -> Float[np.ndarray, "outcome y"]:
    """The oracle's likelihood of every grid value under every class, ``[class, y]``:
    the density for continuous observation models, the mass of 0 and 1 for Bernoulli."""
    ex = world.experiments[experiment]
    g = np.asarray(grid, dtype=np.float64)
    m = conditional_means(world, ex.attribute)[:, :, None]
    s = world.sds[:, ex.attribute][:, None, None]
    if ex.observation == "bernoulli":
        p = bernoulli_p(m[:, :, 0], s[:, :, 0]).mean(axis=1)[:, None]
        return np.asarray(np.where(g[None, :] >= 0.5, p, 1.0 - p))
    if ex.observation == "uniform":  # Phi differences directly: no logs needed on a grid
        hi = (g[None, None, :] + world.sigma - m) / s
        lo = (g[None, None, :] - world.sigma - m) / s
        upper = lo > 0
        mass = np.where(upper, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))
        return np.asarray(mass.mean(axis=1) / (2.0 * world.sigma))
    dens = np.exp(conditional_log_density(ex.observation, g[None, None, :], m, s, world.sigma))
    return np.asarray(dens.mean(axis=1))


def measurement_grid(world: World, experiment: int, step_per_sd: int = 8) -> np.ndarray:
    """The result values to integrate over: ``[0, 1]`` for Bernoulli, otherwise an even
    grid covering every class's likelihood mass."""
    ex = world.experiments[experiment]
    if ex.observation == "bernoulli":
        return np.array([0.0, 1.0])
    m = conditional_means(world, ex.attribute)
    s = world.sds[:, ex.attribute]
    noise = {"exact": 0.0, "gaussian": world.sigma, "uniform": world.sigma / np.sqrt(3.0)}
    sd_min = float(np.sqrt(s.min() ** 2 + noise[ex.observation] ** 2))
    sd_max = float(np.sqrt(s.max() ** 2 + noise[ex.observation] ** 2))
    reach = 8.0 * sd_max + (world.sigma if ex.observation == "uniform" else 0.0)
    lo = float(m.min()) - reach
    hi = float(m.max()) + reach
    n = int(np.ceil((hi - lo) / (sd_min / step_per_sd))) + 1
    return np.linspace(lo, hi, n)


def grid_weights(world: World, experiment: int, grid: Float[np.ndarray, " y"]) -> np.ndarray:
    """Quadrature weights of :func:`measurement_grid`: 1 per outcome for Bernoulli, the
    trapezoid rule otherwise."""
    if world.experiments[experiment].observation == "bernoulli":
        return np.ones(len(grid))
    w = np.gradient(np.asarray(grid, dtype=np.float64))
    w[0] *= 0.5
    w[-1] *= 0.5
    return np.asarray(w)
