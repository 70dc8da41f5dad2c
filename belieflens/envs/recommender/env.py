"""Recommender (BayesBench Task 2): infer a user's type from ratings, predict a held-out one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from belieflens.envs.recommender.bayes import conditional, predictive, type_posterior
from belieflens.envs.recommender.bayesbench import FITTED, SELECTION, load_world
from belieflens.envs.recommender.report import recommender_section
from belieflens.envs.recommender.shown import distributions_text, shown_world
from belieflens.envs.recommender.synthetic import default_world, load_titles
from belieflens.envs.recommender.world import STARS, World, type_profiles
from belieflens.envs.registry import register
from belieflens.episodes.base import Configured, Episode, Marked, Message, Probe, Span, marked
from belieflens.episodes.capabilities import GeneratorBinding
from belieflens.episodes.delivery import (
    Delivers,
    conversation_turns,
    conversations,
    require_generator,
)
from belieflens.episodes.generation import GenerationSettings, derive_seed
from belieflens.episodes.params import bad, check_temperature, int_in, param
from belieflens.episodes.questions import mcq_probe
from belieflens.report.section import SectionFn
from belieflens.types import Delivery

RATING_LABELS: tuple[str, ...] = tuple(f"{s} star" if s == 1 else f"{s} stars" for s in STARS)
"""Outcome labels of the rating probes, in star order."""

TYPE_Q = "Based on the ratings so far, which type of user is this most likely to be?"
"""The type probe's question."""

Titles = Literal["anonymised", "anonymised+genres", "explicit"]
"""How movies are named: ``Movie N``, ``Movie N (genres)``, or ``Title (genres)``."""


@dataclass(frozen=True)
class RecommenderParams(Delivers):
    """Parameters of the recommender environment."""

    world: str = param(
        "default",
        f"'default' (generated from world_seed) or a directory with BayesBench's {FITTED} "
        f"and {SELECTION}",
    )
    world_seed: int = param(0, "seed of the default world (types, tables, titles)")
    types: int = param(4, "user types K of the default world (2..8)")
    movies: int = param(12, "movies in the default world's rated sequence (1..30)")
    targets: int = param(4, "held-out target movies of the default world (1..10)")
    turns: int = param(10, "evidence turns T: ratings revealed, at most the sequence length")
    prompt: Literal["bayesbench", "profiles"] = param(
        "bayesbench",
        "what the model is told of the types: bayesbench = each type's share and its rating "
        "distribution of every movie rated and of the target, what the oracle conditions on "
        "(BayesBench Sec. 3); profiles = the earlier genre profiles with rounded shares",
    )
    titles: Literal["anonymised", "anonymised+genres", "explicit"] = param(
        "anonymised",
        "movie names: 'Movie N' (BayesBench's anonymised condition), 'Movie N (genres)', or "
        "the titles with genres (BayesBench's explicit condition)",
    )
    decimals: int = param(
        1, "decimals of the percentages under prompt=bayesbench (0..6); the world is rounded "
           "to the stated values, so the oracle conditions on exactly what is shown"
    )
    conditional: bool = param(True, "ask the type-conditional rating probe for every type")
    delivery: Literal["single-turn", "multi-turn", "multi-turn-self", "all", "all+self"] = param(
        "multi-turn-self",
        "multi-turn-self (the model writes its own replies between turns: BayesBench's main "
        "results, App. 10), single-turn, multi-turn, all (single and multi) or all+self",
    )
    temperature: float = param(0.7, "sampling temperature of generated replies (multi-turn-self)")
    reply_tokens: int = param(96, "max new tokens of a generated reply (multi-turn-self)")

    def __post_init__(self) -> None:
        if self.world != "default" and not Path(self.world).is_dir():
            raise bad(
                "world", self.world, f"'default' or a directory holding {FITTED} and {SELECTION}"
            )
        if self.world_seed < 0:
            raise bad("world_seed", self.world_seed, "an integer >= 0")
        int_in("types", self.types, 2, 8)
        int_in("movies", self.movies, 1, 30)
        int_in("targets", self.targets, 1, 10)
        if self.world == "default" and self.movies + self.targets > len(load_titles().titles):
            raise bad("targets", self.targets, "movies + targets within the shipped title list")
        int_in("turns", self.turns, 1, 1000)
        if self.world == "default" and self.turns > self.movies:
            raise bad("turns", self.turns, f"at most movies = {self.movies}")
        check_temperature("temperature", self.temperature)
        int_in("decimals", self.decimals, 0, 6)
        int_in("reply_tokens", self.reply_tokens, 1, 4096)


def movie_names(world: World, titles: Titles) -> tuple[str, ...]:
    """How each movie is named in prompts: ``Movie N``, ``Movie N (genres)`` or
    ``Title (genres)``.

    Anonymised numbers run over the rated sequence first, then the targets, then
    the rest of the world's movies.
    """
    order = [*world.sequence, *world.targets]
    rest = [m for m in range(len(world.movie_ids)) if m not in set(order)]
    number = {m: i + 1 for i, m in enumerate([*order, *rest])}
    names = []
    for m in range(len(world.movie_ids)):
        base = world.titles[m] if titles == "explicit" else f"Movie {number[m]}"
        show_genres = titles != "anonymised" and world.genres[m]
        names.append(f"{base} ({', '.join(world.genres[m])})" if show_genres else base)
    return tuple(names)


def type_labels(k: int) -> tuple[str, ...]:
    """Outcome labels of the type probe: ``Type 1`` .. ``Type K``."""
    return tuple(f"Type {i + 1}" for i in range(k))


def intro_text(world: World) -> str:
    """The ``profiles`` introduction: the service, each type's rounded share and tastes."""
    lines = [
        "I run a movie recommendation service. Our users fall into "
        f"{world.n_types} types with different tastes in movies:"
    ]
    if world.descriptions:
        profiles = list(world.descriptions)
    else:
        profiles = []
        for liked, disliked, mean in type_profiles(world):
            parts = [f"likes {' and '.join(liked)}"] if liked else []
            parts += [f"dislikes {' and '.join(disliked)}"] if disliked else []
            parts.append(f"rates movies {mean:.1f} stars on average")
            profiles.append("; ".join(parts))
    for k, text in enumerate(profiles):
        lines.append(f"- Type {k + 1} (about {100 * world.pi[k]:.0f}% of users): {text}.")
    lines.append(
        "I will tell you how one of our users, whose type we do not know, rated some movies "
        "on a scale of 1 to 5 stars."
    )
    return "\n".join(lines)


def _stars(y: int) -> str:
    return RATING_LABELS[y - 1]


@register
class Recommender(Configured[RecommenderParams], GeneratorBinding):
    """Recommender: a user of unknown type rates movies; the model infers the type and predicts.

    Each episode draws a user type z from the prior, reveals the user's ratings of
    the world's movie sequence one per turn, and asks for the type (oracle: the exact
    posterior over types), the rating of a held-out target movie (oracle: the
    posterior predictive) and, for every type k, the rating given type k (oracle:
    the rating table of the target under k). Target ``i % targets`` serves episode i.
    Under ``prompt=bayesbench`` (the default) the introduction states every type's
    share and rating distributions of the rated movies and the target, and the world
    is the one those percentages state (:func:`~belieflens.envs.recommender.shown.shown_world`).

    Parameters are the fields of its ``Params`` record (``RecommenderParams``). Probes per
    turn: ``type`` (the user types), ``rating`` and ``rating|type=k`` (the rating scale); in a
    cache file their beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    The default delivery is ``multi-turn-self``, as BayesBench reports its main results: the
    evaluated model writes its own reply after every rating, so a generator must be bound
    (``belieflens extract`` binds the model); ``delivery=all`` needs none.

    Examples:
        >>> belieflens.envs.get("recommender").requires_generator
        True
        >>> env = belieflens.envs.get("recommender", turns=3, delivery="all")
        >>> episode = next(env.episodes(1, seed=0))
        >>> len(episode.turns), episode.turns[1].probes[0].name
        (4, 'type')
        >>> episode.turns[1].probes[0].labels
        ('Type 1', 'Type 2', 'Type 3', 'Type 4')
    """

    name = "recommender"
    Params = RecommenderParams
    sections: ClassVar[tuple[SectionFn, ...]] = (recommender_section,)
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: RecommenderParams) -> None:
        self._params = params
        if params.world == "default":
            self._world = default_world(
                params.world_seed, types=params.types, movies=params.movies, targets=params.targets
            )
        else:
            self._world = load_world(params.world)
            if params.types != 4 and params.types != self._world.n_types:
                raise bad("types", params.types, f"{self._world.n_types} (the imported world's K)")
            if params.turns > len(self._world.sequence):
                raise bad(
                    "turns",
                    params.turns,
                    f"at most {len(self._world.sequence)} (the imported sequence)",
                )
        if params.prompt == "bayesbench":
            self._world = shown_world(self._world, params.decimals)
        self._names = movie_names(self._world, params.titles)

    @property
    def world(self) -> World:
        """The world episodes are drawn from."""
        return self._world

    @property
    def requires_generator(self) -> bool:
        """Whether these parameters need generated text (delivery multi-turn-self)."""
        return "multi-turn-self" in self._params.deliveries

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes; episode ``i`` uses ``np.random.default_rng([seed, i])``."""
        if self.requires_generator:
            require_generator("delivery multi-turn-self", self._generator, self.name)
        return self._episodes(n, seed)

    def _episodes(self, n: int, seed: int) -> Iterator[Episode]:
        for job in self.episode_jobs(n, seed):
            yield from job

    def episode_jobs(self, n: int, seed: int) -> list[Iterator[Episode]]:
        """One job per episode (:meth:`episodes`): episodes share nothing, so those whose
        replies are generated may run together, their generations batched."""
        if self.requires_generator:
            require_generator("delivery multi-turn-self", self._generator, self.name)
        return [self._job(i, seed) for i in range(n)]

    def _job(self, index: int, seed: int) -> Iterator[Episode]:
        yield self._episode(index, seed, np.random.default_rng([seed, index]))

    def _episode(self, index: int, seed: int, rng: np.random.Generator) -> Episode:
        p, w = self._params, self._world
        z = int(rng.choice(w.n_types, p=w.pi))
        target = w.targets[index % len(w.targets)]
        movies = list(w.sequence[: p.turns])
        ratings = [int(rng.choice(len(STARS), p=w.phi[m, z])) + 1 for m in movies]
        target_rating = int(rng.choice(len(STARS), p=w.phi[target, z])) + 1
        observations = [
            f"They rated {self._names[m]}: {_stars(y)}."
            for m, y in zip(movies, ratings, strict=True)
        ]
        convs = self._conversations(index, seed, movies, ratings, target, observations)
        turns = conversation_turns(
            convs, observations,
            lambda t, ctx: self._probes(ctx, type_posterior(w, movies[:t], ratings[:t]), target),
        )
        truth: dict[str, float | str] = {
            "type": float(z),
            "type_label": type_labels(w.n_types)[z],
            "target": w.movie_ids[target],
            "target_rating": float(target_rating),
            "movies": ",".join(w.movie_ids[m] for m in movies),
            "ratings": ",".join(str(y) for y in ratings),
            "world": w.source,
        }
        return Episode(index=index, turns=turns, truth=truth)

    def _conversations(
        self, index: int, seed: int, movies: list[int], ratings: list[int], target: int,
        observations: list[str],
    ) -> list[dict[Delivery, tuple[Message, ...]]]:
        """Each turn's context per delivery: the introduction and the ratings so far."""
        p, w = self._params, self._world
        if p.prompt == "bayesbench":
            intro = distributions_text(w, self._names, [*movies, target], p.decimals)
        else:
            intro = intro_text(w)
        single: list[tuple[str, tuple[Span, ...]]] = []
        for t in range(p.turns + 1):
            if t:
                lines: list[str | Marked] = [f"{intro}\n\nTheir ratings so far:"]
                for k, (m, y) in enumerate(zip(movies[:t], ratings[:t], strict=True)):
                    lines += ["\n- ", Marked(f"{self._names[m]}: {_stars(y)}", "evidence", k + 1)]
                single.append(marked(*lines))
            else:
                single.append((f"{intro}\n\nThey have not rated any movies yet.", ()))
        rated = [marked("They rated ", Marked(o[len("They rated "):-1], "evidence", t + 1), ".")
                 for t, o in enumerate(observations)]
        return conversations(
            intro,
            [text for text, _ in rated],
            [text for text, _ in single],
            p.deliveries,
            observation_spans=[spans for _, spans in rated],
            single_spans=[spans for _, spans in single],
            generator=self._generator,
            settings=GenerationSettings(p.temperature, p.reply_tokens),
            seeds=[derive_seed(seed, index, 1, t) for t in range(p.turns + 1)],
            env=self.name,
        )

    def _probes(
        self, contexts: dict[Delivery, tuple[Message, ...]], post: NDArray[np.float64],
        target: int,
    ) -> list[Probe]:
        """One turn's probes per delivery: the type, the target's rating and, if asked, the
        rating given each type (``post``: the posterior over types after the turn)."""
        w = self._world
        target_name = self._names[target]
        rating_q = f"How many stars (1 to 5) will this user give {target_name}?"
        oracle_type = tuple(float(x) for x in post)
        pred = tuple(float(x) for x in predictive(w, post, target))
        probes: list[Probe] = []
        for delivery in self._params.deliveries:
            ctx = contexts[delivery]
            probes.append(
                mcq_probe("type", ctx, TYPE_Q, type_labels(w.n_types), oracle_type, delivery)
            )
            probes.append(mcq_probe("rating", ctx, rating_q, RATING_LABELS, pred, delivery))
            if self._params.conditional:
                for k in range(w.n_types):
                    q = (
                        f"Suppose this user is of Type {k + 1}. How many stars (1 to 5) "
                        f"would they give {target_name}?"
                    )
                    probes.append(
                        mcq_probe(
                            f"rating|type={k}",
                            ctx,
                            q,
                            RATING_LABELS,
                            tuple(float(x) for x in conditional(w, target, k)),
                            delivery,
                        )
                    )
        return probes
