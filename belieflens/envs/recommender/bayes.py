"""Exact Bayesian inference in the recommender world: type posterior and rating predictions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from belieflens.envs.recommender.world import STARS, World


def type_posterior(
    world: World, movies: Sequence[int], ratings: Sequence[int]
) -> NDArray[np.float64]:
    """P(Z = k | ratings) for every type k, computed in log space.

    ``movies`` are movie indices and ``ratings`` their stars (1..5), in any order.
    """
    if len(movies) != len(ratings):
        raise ValueError("need one rating per movie")
    log_post = np.log(np.clip(world.pi, 1e-300, None))
    for m, y in zip(movies, ratings, strict=True):
        if y not in STARS:
            raise ValueError(f"a rating is 1..5 stars, got {y}")
        log_post = log_post + np.log(np.clip(world.phi[m, :, y - 1], 1e-300, None))
    log_post -= log_post.max()
    post = np.exp(log_post)
    result: NDArray[np.float64] = post / post.sum()
    return result


def predictive(world: World, posterior: NDArray[np.float64], target: int) -> NDArray[np.float64]:
    """Posterior predictive P(y_target | ratings) = sum_k P(k | ratings) phi[target, k]."""
    result: NDArray[np.float64] = posterior @ world.phi[target]
    return result


def conditional(world: World, target: int, k: int) -> NDArray[np.float64]:
    """P(rating of ``target`` | Z = k): the type-conditional rating distribution."""
    result: NDArray[np.float64] = world.phi[target, k].copy()
    return result
