"""The recommender world: user types, their prior, per-movie rating tables, sequence and targets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

STARS: tuple[int, ...] = (1, 2, 3, 4, 5)
"""The rating scale; outcome ``j`` of a rating probe is ``STARS[j]`` stars."""


@dataclass(frozen=True)
class World:
    """A mixture of K user types over M movies.

    Attributes:
        pi: prior over user types, shape ``[K]``.
        phi: rating tables, ``phi[m, k, j]`` = P(rating ``STARS[j]`` | movie m, type k),
            shape ``[M, K, 5]``.
        movie_ids: an identifier per movie (BayesBench ids, or ``m1``, ``m2``, ...).
        titles: the movie's real or written title.
        genres: the movie's genres.
        sequence: movie indices rated in order, one per evidence turn.
        targets: held-out movie indices whose rating is predicted (not in ``sequence``).
        source: where the world came from (``default`` or the imported directory).
        descriptions: how each type is described to the model; empty = derived from
            the tables by :func:`type_profiles`.
    """

    pi: NDArray[np.float64]
    phi: NDArray[np.float64]
    movie_ids: tuple[str, ...]
    titles: tuple[str, ...]
    genres: tuple[tuple[str, ...], ...]
    sequence: tuple[int, ...]
    targets: tuple[int, ...]
    source: str = "default"
    descriptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        k = self.pi.shape[0]
        m = self.phi.shape[0]
        if self.pi.ndim != 1 or k < 2:
            raise ValueError("pi must be a vector over at least 2 types")
        if self.phi.shape != (m, k, len(STARS)):
            raise ValueError(f"phi must have shape [M, {k}, {len(STARS)}], got {self.phi.shape}")
        if not (len(self.movie_ids) == len(self.titles) == len(self.genres) == m):
            raise ValueError("movie_ids, titles and genres need one entry per movie")
        if not np.allclose(self.pi.sum(), 1.0) or not np.allclose(self.phi.sum(-1), 1.0):
            raise ValueError("pi and every rating table must sum to 1")
        if set(self.sequence) & set(self.targets):
            raise ValueError("target movies must be held out of the rated sequence")
        if self.descriptions and len(self.descriptions) != k:
            raise ValueError("descriptions need one entry per type")
        if not self.sequence or not self.targets:
            raise ValueError("a world needs a rated sequence and at least one target")

    @property
    def n_types(self) -> int:
        """The number of user types K."""
        return int(self.pi.shape[0])

    def expected_rating(self) -> NDArray[np.float64]:
        """Mean rating of each movie under each type, shape ``[M, K]``."""
        result: NDArray[np.float64] = self.phi @ np.asarray(STARS, dtype=np.float64)
        return result


def type_profiles(
    world: World, top: int = 2
) -> tuple[tuple[tuple[str, ...], tuple[str, ...], float], ...]:
    """Each type's most liked and most disliked genres and its mean rating.

    A genre's score for type k is the mean expected rating of the movies carrying
    it minus type k's mean over all movies; the ``top`` highest positive scores are
    liked, the ``top`` lowest negative ones disliked.
    """
    mean = world.expected_rating()
    all_genres = sorted({g for gs in world.genres for g in gs})
    out = []
    for k in range(world.n_types):
        base = float(mean[:, k].mean())
        scores = []
        for g in all_genres:
            rows = [i for i, gs in enumerate(world.genres) if g in gs]
            scores.append((float(mean[rows, k].mean()) - base, g))
        ranked = sorted(scores, key=lambda s: (-s[0], s[1]))
        liked = tuple(g for s, g in ranked[:top] if s > 0)
        disliked = tuple(g for s, g in sorted(scores, key=lambda s: (s[0], s[1]))[:top] if s < 0)
        out.append((liked, disliked, base))
    return tuple(out)
