"""The project's own recommender world, generated from a seed.

Types differ in which genres they like, not in how generously they rate: each
type's genre preference vector has two liked (+1), two disliked (-1) and
neutral (0) genres, so it sums to zero and every type's average over genres is
the same. Titles and genres come from the shipped list
``belieflens/data/recommender/titles.json`` (written for this project).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

import numpy as np
from numpy.typing import NDArray

from belieflens.envs.recommender.world import STARS, World


@dataclass(frozen=True)
class TitleList:
    """The shipped genre-tagged titles."""

    genres: tuple[str, ...]
    titles: tuple[tuple[str, tuple[str, ...]], ...]


def load_titles() -> TitleList:
    """Read the shipped title list from package data."""
    path = resources.files("belieflens") / "data" / "recommender" / "titles.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    return TitleList(
        genres=tuple(raw["genres"]),
        titles=tuple((t["title"], tuple(t["genres"])) for t in raw["titles"]),
    )


def preferences(rng: np.random.Generator, genres: int, types: int) -> NDArray[np.float64]:
    """Genre preference vectors ``[types, genres]``: +1 on two, -1 on two, 0 elsewhere, distinct."""
    if genres < 4:
        raise ValueError("need at least 4 genres")
    out = np.zeros((types, genres))
    seen: set[frozenset[int]] = set()
    k = 0
    while k < types:
        perm = rng.permutation(genres)
        liked = frozenset(int(g) for g in perm[:2])
        if liked in seen:
            continue
        seen.add(liked)
        out[k, perm[:2]] = 1.0
        out[k, perm[2:4]] = -1.0
        k += 1
    return out


def rating_table(mean: NDArray[np.float64], noise: float) -> NDArray[np.float64]:
    """Discretised Gaussian over 1..5 stars around ``mean`` (any shape), last axis = stars."""
    stars = np.asarray(STARS, dtype=np.float64)
    logits = -((stars - mean[..., None]) ** 2) / (2.0 * noise**2)
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    result: NDArray[np.float64] = p / p.sum(-1, keepdims=True)
    return result


def default_world(seed: int, *, types: int = 4, movies: int = 12, targets: int = 4,
                  spread: float = 1.5, noise: float = 0.9) -> World:
    """Generate the default world: ``movies`` rated in sequence and ``targets`` held out.

    The rating mean of movie m under type k is ``3 + spread * taste[m, k] + q[m]``,
    where ``taste[m, k]`` is the mean of ``w[k, g]`` over the movie's genres g,
    centred over the world's movies for each type (so no type rates more generously
    on these movies), and ``q[m] ~ N(0, 0.3)`` is a quality shared by all types.
    The type prior is drawn from Dirichlet(4, ..., 4).
    """
    rng = np.random.default_rng([seed, 0xBE11EF])
    names = load_titles()
    if movies + targets > len(names.titles):
        raise ValueError(f"the title list has {len(names.titles)} titles")
    w = preferences(rng, len(names.genres), types)
    pi = rng.dirichlet(np.full(types, 4.0))
    chosen = rng.choice(len(names.titles), size=movies + targets, replace=False)
    titles = tuple(names.titles[int(i)][0] for i in chosen)
    genres = tuple(names.titles[int(i)][1] for i in chosen)
    index = {g: j for j, g in enumerate(names.genres)}
    taste = np.array([[w[k, [index[g] for g in gs]].mean() for k in range(types)] for gs in genres])
    taste -= taste.mean(0, keepdims=True)  # equal mean taste per type over this world's movies
    quality = rng.normal(0.0, 0.3, size=(movies + targets, 1))
    phi = rating_table(3.0 + spread * taste + quality, noise)
    descriptions = tuple(
        f"likes {' and '.join(names.genres[g] for g in np.flatnonzero(w[k] > 0))}; "
        f"dislikes {' and '.join(names.genres[g] for g in np.flatnonzero(w[k] < 0))}"
        for k in range(types)
    )
    return World(
        pi=pi,
        phi=phi,
        movie_ids=tuple(f"m{i + 1}" for i in range(movies + targets)),
        titles=titles,
        genres=genres,
        sequence=tuple(range(movies)),
        targets=tuple(range(movies, movies + targets)),
        source="default",
        descriptions=descriptions,
    )
