"""ProteinWorld oracles: the passive Bayesian posterior and the active (max-EIG) experimenter.

- Passive: exact Bayes over classes on a given experiment history (with a
  delta-method standard error where the likelihood is Monte Carlo).
- Active: at each step run the experiment of maximal expected information gain
  ``EIG_j = I(class; y_j)`` under the current posterior.

EIG is computed on a measurement grid in two algebraically equal forms,
``entropy`` (prior entropy minus expected posterior entropy) and ``kl``
(expected KL between ``p(y | class)`` and the predictive ``p(y)``), and also by
plain Monte Carlo (:func:`eig_mc`, with its standard error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from jaxtyping import Float
from numpy.typing import ArrayLike

from belieflens.analysis.stats import mean_sem_values
from belieflens.envs.protein_world.world import (
    World,
    grid_weights,
    likelihood,
    likelihood_grid,
    measure,
    measurement_grid,
)

EigMethod = Literal["entropy", "kl"]
"""The two grid forms of the expected information gain."""


@dataclass(frozen=True)
class Posterior:
    """A posterior over classes with its Monte Carlo standard error (0 where exact)."""

    probs: tuple[float, ...]
    se: tuple[float, ...]


@dataclass(frozen=True)
class ExperimentGrid:
    """The likelihood of one experiment tabulated on a measurement grid.

    Attributes:
        y: grid of result values (an even grid, or the outcomes 0 and 1 of a Bernoulli).
        lik: ``p(y | class)`` per class and grid value, ``[class, y]``.
        w: quadrature weight of each grid value (trapezoid rule; 1 for discrete results).
    """

    y: Float[np.ndarray, " y"]
    lik: Float[np.ndarray, "outcome y"]
    w: Float[np.ndarray, " y"]


@dataclass(frozen=True)
class ActiveRun:
    """A trajectory of the active experimenter.

    Attributes:
        experiments: experiment chosen at each step.
        observations: the shown result at each step.
        posteriors: posterior before step 1, after step 1, ..., ``[step + 1, class]``.
    """

    experiments: tuple[int, ...]
    observations: tuple[float, ...]
    posteriors: tuple[tuple[float, ...], ...]


def posterior(world: World, history: Sequence[tuple[int, float]]) -> Posterior:
    """Exact Bayes over classes from the world's prior and ``(experiment, y)`` history.

    The standard error (``hard`` worlds) propagates each likelihood's relative
    Monte Carlo error by the delta method, treating classes and steps as independent.
    """
    logp = np.log(np.asarray(world.prior, dtype=np.float64))
    rel_var = np.zeros_like(logp)
    for experiment, y in history:
        lk = likelihood(world, experiment, y)
        logp = logp + lk.log_value
        rel_var = rel_var + lk.rel_se**2
    p = np.exp(logp - logp.max())
    p = p / p.sum()
    # d pi_k = pi_k (d_k - sum_l pi_l d_l), d = relative errors of the unnormalised weights
    other = np.sum(p**2 * rel_var) - p**2 * rel_var
    var = p**2 * ((1.0 - p) ** 2 * rel_var + other)
    return Posterior(tuple(float(x) for x in p), tuple(float(x) for x in np.sqrt(var)))


def experiment_grids(world: World) -> tuple[ExperimentGrid, ...]:
    """Every experiment's likelihood on its measurement grid (compute once per world)."""
    out = []
    for j in range(len(world.experiments)):
        y = measurement_grid(world, j)
        out.append(ExperimentGrid(y, likelihood_grid(world, j, y), grid_weights(world, j, y)))
    return tuple(out)


def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    safe = np.where(p > 0, p, 1.0)
    return np.asarray(-np.sum(np.where(p > 0, p * np.log(safe), 0.0), axis=axis))


def eig(prior: ArrayLike, grid: ExperimentGrid, method: EigMethod = "entropy") -> float:
    """Expected information gain (nats) of one experiment under ``prior`` over classes.

    ``entropy``: ``H(prior) - E_y H(posterior | y)``; ``kl``:
    ``sum_c prior_c KL(p(y | c) || p(y))``. Both integrate over the grid with its
    weights (trapezoid rule, or a sum over discrete results), so they agree when the
    grid holds all the likelihood mass.
    """
    pi = np.asarray(prior, dtype=np.float64)
    lik = np.asarray(grid.lik, dtype=np.float64)
    w = np.asarray(grid.w, dtype=np.float64)
    joint = pi[:, None] * lik  # class y
    py = joint.sum(axis=0)
    if method == "entropy":
        post = np.where(py > 0, joint / np.where(py > 0, py, 1.0), 0.0)
        return float(_entropy(pi) - np.sum(w * py * _entropy(post, axis=0)))
    if method == "kl":
        pos = (lik > 0) & (py[None, :] > 0)
        ratio = np.where(pos, lik, 1.0) / np.where(py > 0, py, 1.0)[None, :]
        integrand = np.where(pos, lik * np.log(ratio), 0.0)
        return float(np.sum(pi * (integrand @ w)))
    raise ValueError(f"method must be 'entropy' or 'kl', got {method!r}")


def eig_mc(
    world: World, prior: ArrayLike, experiment: int, rng: np.random.Generator, n: int = 4000
) -> tuple[float, float]:
    """Monte Carlo EIG and its standard error: mean of ``log p(y|c) - log p(y)``.

    Draws ``c ~ prior`` and a fresh measurement ``y``, and scores it with the
    oracle's likelihood.
    """
    pi = np.asarray(prior, dtype=np.float64)
    log_pi = np.log(np.where(pi > 0, pi, 1.0))
    classes = rng.choice(len(pi), size=n, p=pi)
    terms = np.empty(n)
    for i, c in enumerate(classes):
        y = measure(world, int(c), experiment, rng)
        lv = likelihood(world, experiment, y).log_value
        joint = np.where(pi > 0, log_pi + lv, -np.inf)
        m = joint.max()
        terms[i] = lv[c] - (m + np.log(np.exp(joint - m).sum()))
    mean, sem, _ = mean_sem_values(terms)
    return float(mean), float(sem)


def best_experiment(prior: ArrayLike, grids: Sequence[ExperimentGrid]) -> int:
    """The experiment of maximal EIG (the lowest index among ties within 1e-12)."""
    gains = np.array([eig(prior, g) for g in grids])
    return int(np.flatnonzero(gains >= gains.max() - 1e-12)[0])


def active_run(
    world: World,
    truth: int,
    steps: int,
    rng: np.random.Generator,
    *,
    grids: Sequence[ExperimentGrid] | None = None,
) -> ActiveRun:
    """Run the max-EIG experimenter for ``steps`` steps on proteins of class ``truth``
    (results shown, and conditioned on, as the world rounds them)."""
    gs = experiment_grids(world) if grids is None else grids
    history: list[tuple[int, float]] = []
    post = posterior(world, history).probs
    posteriors = [post]
    for _ in range(steps):
        j = best_experiment(post, gs)
        y = measure(world, truth, j, rng)
        history.append((j, y))
        post = posterior(world, history).probs
        posteriors.append(post)
    return ActiveRun(
        experiments=tuple(j for j, _ in history),
        observations=tuple(y for _, y in history),
        posteriors=tuple(posteriors),
    )
