"""The recommender world as BayesBench prompts it: type shares and each type's rating
distributions, written as percentages, with the world rounded to what is written.

The model is told what the oracle conditions on: the share of each user type and, for
every movie the user rates and the target movie, the distribution of ratings given by
users of each type (BayesBench's anonymised condition: "movie titles are replaced with
abstract labels, so the model can only reason from rating distributions"). Percentages
are written to ``decimals`` decimals; :func:`shown_world` rounds the world's
distributions to those values first (largest remainder, so each still sums to exactly
100%), and the oracle uses the rounded world, so every number stated is a number used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from belieflens.envs.recommender.world import STARS, World


def round_distribution(p: NDArray[np.float64], decimals: int) -> NDArray[np.int64]:
    """``p`` (last axis sums to 1) as integer counts of ``10**-decimals`` percent that sum
    to exactly ``100 * 10**decimals`` (largest-remainder rounding, ties to the lower index)."""
    total = 100 * 10**decimals
    q = np.asarray(p, dtype=np.float64)
    raw = q / q.sum(-1, keepdims=True) * total
    units = np.floor(raw).astype(np.int64)
    short = total - units.sum(-1)
    order = np.argsort(-(raw - units), axis=-1, kind="stable")
    rank = np.argsort(order, axis=-1, kind="stable")
    result: NDArray[np.int64] = units + (rank < short[..., None]).astype(np.int64)
    return result


def shown_world(world: World, decimals: int) -> World:
    """``world`` with its type prior and rating tables rounded to the percentages written."""
    scale = 100.0 * 10**decimals
    pi = round_distribution(world.pi, decimals) / scale
    phi = round_distribution(world.phi, decimals) / scale
    return dataclasses.replace(world, pi=pi, phi=phi)


def percent(p: float, decimals: int) -> str:
    """A probability of the shown world as the percentage written, e.g. ``12.2%``."""
    return f"{p * 100:.{decimals}f}%"


def _stars(j: int) -> str:
    return f"{STARS[j]} star" if STARS[j] == 1 else f"{STARS[j]} stars"


def distributions_text(
    world: World, names: Sequence[str], movies: Sequence[int], decimals: int
) -> str:
    """The type shares and each type's rating distribution of every movie in ``movies``."""
    k = world.n_types
    lines = [
        "I run a movie recommendation service. Our users fall into "
        f"{k} types. The share of each type among our users:"
    ]
    lines += [f"- Type {i + 1}: {percent(float(world.pi[i]), decimals)}" for i in range(k)]
    lines.append("How users of each type rate these movies (the share of users of that type "
                 "giving each rating):")
    for m in movies:
        lines.append(f"{names[m]}:")
        for i in range(k):
            dist = ", ".join(f"{_stars(j)} {percent(float(world.phi[m, i, j]), decimals)}"
                             for j in range(len(STARS)))
            lines.append(f"- Type {i + 1}: {dist}")
    lines.append(
        "I will tell you how one of our users, whose type we do not know, rated some movies "
        "on a scale of 1 to 5 stars."
    )
    return "\n".join(lines)
