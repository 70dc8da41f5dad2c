"""Coin flip (BayesBench environment 1): a Beta-Bernoulli learner's exact posterior."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from belieflens.envs.coin_flip import statistics
from belieflens.envs.registry import register
from belieflens.episodes.base import Configured, Episode, Marked, Message, Probe, Turn
from belieflens.episodes.delivery import Delivers
from belieflens.episodes.params import bad, int_in, param, positive
from belieflens.episodes.questions import mcq_probe
from belieflens.errors import ParameterError
from belieflens.report.section import SectionFn
from belieflens.types import Delivery

INTRO = (
    "I have a coin that may be biased: its probability of landing heads is unknown to both "
    "of us. I will flip it and tell you the results."
)
ACK = "Understood."
NEXT_FLIP_Q = "What do you think the next flip will be?"
BIAS_Q = "Which range most likely contains the coin's probability of landing heads?"


@dataclass(frozen=True)
class CoinFlipParams(Delivers):
    """Parameters of the coin-flip environment."""

    a0: float = param(1.0, "Beta prior pseudo-count of heads (> 0)")
    b0: float = param(1.0, "Beta prior pseudo-count of tails (> 0)")
    theta: float | None = param(None, "fixed P(heads) in [0, 1]; default: drawn from the prior")
    turns: int = param(10, "number of evidence turns T (>= 1)")
    per_turn: int = param(1, "flips per user message (>= 1)")
    bins: int = param(5, "equal-width bins of the bias probe (2..10)")
    delivery: Literal["single-turn", "multi-turn", "all"] = param(
        "all", "how evidence is delivered"
    )

    def __post_init__(self) -> None:
        positive("a0", self.a0)
        positive("b0", self.b0)
        if self.theta is not None and not 0.0 <= self.theta <= 1.0:
            raise bad("theta", self.theta, "a number in [0, 1] or none")
        int_in("turns", self.turns, 1, 1000)
        int_in("per_turn", self.per_turn, 1, 100)
        int_in("bins", self.bins, 2, 10)


def next_flip_oracle(a0: float, b0: float, heads: float, n: float) -> tuple[float, float]:
    """Posterior predictive (P(heads), P(tails)) of the next flip."""
    p = (a0 + heads) / (a0 + b0 + n)
    return (p, 1.0 - p)


def bias_oracle(a0: float, b0: float, heads: float, n: float, bins: int) -> tuple[float, ...]:
    """Beta posterior mass of each of ``bins`` equal-width bins of theta."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    from scipy import special  # imported on use: it is slow to import

    cdf = special.betainc(a0 + heads, b0 + n - heads, edges)
    mass = np.diff(cdf)
    return tuple(float(x) for x in mass / mass.sum())


def bin_labels(bins: int) -> tuple[str, ...]:
    """Labels of the bias bins, e.g. ``0.0 to 0.2``."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    return tuple(f"{edges[i]:.2f} to {edges[i + 1]:.2f}" for i in range(bins))


def _flips_text(flips: Sequence[int]) -> str:
    return ", ".join("heads" if f else "tails" for f in flips)


def _flips_marked(flips: Sequence[int], per_turn: int, first_turn: int = 1) -> list[str | Marked]:
    """The flips' text with each turn's flips marked as that turn's evidence."""
    out: list[str | Marked] = []
    for k in range(0, len(flips), per_turn):
        if k:
            out.append(", ")
        out.append(Marked(_flips_text(flips[k : k + per_turn]), "evidence",
                          first_turn + k // per_turn))
    return out


def _summary(flips: Sequence[int]) -> str:
    h = sum(flips)
    return f"({len(flips)} flips so far: {h} heads, {len(flips) - h} tails)"


def single_message(flips: Sequence[int], per_turn: int) -> Message:
    """The single-turn message after ``flips``: each turn's flips and the counts marked."""
    if not flips:
        return Message("user", INTRO + "\nNo flips yet.")
    return Message.of("user", INTRO + "\nThe results so far: ", *_flips_marked(flips, per_turn),
                      " ", Marked(_summary(flips), "summary"), ".")


@register
class CoinFlip(Configured[CoinFlipParams]):
    """Coin flip with a Beta(a0, b0) prior on the bias; probes: next flip and binned bias.

    Each episode draws a bias (or uses the fixed ``theta``), flips ``turns * per_turn``
    times and reveals ``per_turn`` flips per user message. Oracles are the exact
    Beta-Bernoulli posterior predictive and posterior bin masses.

    Parameters are the fields of :class:`CoinFlipParams`. Each turn asks two probes per
    delivery: ``next-flip`` (outcomes heads, tails) and ``bias`` (``bins`` equal-width bins);
    in a cache file their beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("coin-flip", turns=3)
        >>> episode = next(env.episodes(1, seed=0))
        >>> len(episode.turns), [p.name for p in episode.turns[1].probes]
        (4, ['next-flip', 'bias', 'next-flip', 'bias'])
        >>> episode.turns[0].probes[0].oracle   # the prior's predictive
        (0.5, 0.5)
    """

    name = "coin-flip"
    Params = CoinFlipParams
    sections: ClassVar[tuple[SectionFn, ...]] = ()
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: CoinFlipParams) -> None:
        self._params = params
        self._strength = 1.0

    @property
    def strength(self) -> float:
        """The weight of the evidence in the oracles (1: the exact posterior)."""
        return self._strength

    def tempered(self, strength: float) -> CoinFlip:
        """A copy whose oracles weight the evidence by ``strength``: after ``h`` heads in
        ``n`` flips the posterior is Beta(a0 + S·h, b0 + S·(n − h)), whose predictive moves
        S times as far from the prior as the exact one when S·n is small."""
        if not strength > 0:
            raise ParameterError(f"option '--temper' = {strength!r} is not allowed: a number > 0")
        new = copy.copy(self)
        new._strength = float(strength)
        return new

    def statistic_features(self, episode: Episode) -> dict[str, np.ndarray]:
        """The statistic baselines' features of ``episode`` (:mod:`.statistics`)."""
        return statistics.features(episode)

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes; episode ``i`` uses ``np.random.default_rng([seed, i])``."""
        for i in range(n):
            yield self._episode(i, np.random.default_rng([seed, i]))

    def _episode(self, index: int, rng: np.random.Generator) -> Episode:
        p = self._params
        theta = p.theta if p.theta is not None else float(rng.beta(p.a0, p.b0))
        flips = [int(x) for x in rng.random(p.turns * p.per_turn) < theta]
        turns = []
        multi: tuple[Message, ...] = (Message("user", INTRO), Message("assistant", ACK))
        for t in range(p.turns + 1):
            seen = flips[: t * p.per_turn]
            new = flips[(t - 1) * p.per_turn : t * p.per_turn] if t else []
            if t:
                multi = (*multi, Message.of("user", "Result: ",
                                            *_flips_marked(new, p.per_turn, t), "."),
                         Message("assistant", ACK))
            messages: dict[Delivery, tuple[Message, ...]] = {
                "single-turn": (single_message(seen, p.per_turn),),
                "multi-turn": multi,
            }
            heads = self._strength * sum(seen)
            n_seen = self._strength * len(seen)
            probes: list[Probe] = []
            for delivery in p.deliveries:
                ctx = messages[delivery]
                probes.append(
                    mcq_probe(
                        "next-flip", ctx, NEXT_FLIP_Q, ("heads", "tails"),
                        next_flip_oracle(p.a0, p.b0, heads, n_seen), delivery,
                    )
                )
                probes.append(
                    mcq_probe(
                        "bias", ctx, BIAS_Q, bin_labels(p.bins),
                        bias_oracle(p.a0, p.b0, heads, n_seen, p.bins), delivery,
                    )
                )
            turns.append(
                Turn(
                    index=t,
                    observation=_flips_text(new),
                    messages={d: messages[d] for d in p.deliveries},
                    probes=tuple(probes),
                )
            )
        return Episode(index=index, turns=tuple(turns), truth={"theta": theta})
