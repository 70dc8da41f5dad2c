"""Coin flip (BayesBench environment 1): a Beta-Bernoulli learner's exact posterior, and
variants whose belief is not a function of the bag of tokens: a stated prior, faces with
episode-specific names, single-turn delivery without the counts, flips reported by observers
who may be wrong, and a coin that may be swapped."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from belieflens.envs.coin_flip import prompts, statistics
from belieflens.envs.coin_flip.posterior import Report, beliefs
from belieflens.envs.coin_flip.prompts import Setting
from belieflens.envs.registry import register
from belieflens.episodes.base import Configured, Episode, Marked, Message, Probe, Turn
from belieflens.episodes.delivery import Delivers
from belieflens.episodes.params import bad, int_in, param, positive
from belieflens.episodes.questions import mcq_probe
from belieflens.errors import ParameterError
from belieflens.report.section import SectionFn
from belieflens.types import Delivery

INTRO = prompts.intro(Setting())
"""The opening message at the default parameters."""
ACK = "Understood."
NEXT_FLIP_Q = prompts.next_flip_question(Setting())
BIAS_Q = prompts.bias_question(Setting())

MAX_FILTERED_FLIPS = 1000
"""The most flips an episode may have where the posterior is a mixture (noisy reports or
swaps): the recursion's cost grows with the flips."""


def _numbers(name: str, text: str, lo: float, hi: float, *, open_lo: bool = False,
             percent: bool = False) -> tuple[float, ...]:
    """A comma-separated list of numbers in ``[lo, hi]`` (``(lo, hi]`` with ``open_lo``);
    with ``percent`` each must read back exactly as the percentage the prompt shows."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    what = f"a comma-separated list of numbers in {'(' if open_lo else '['}{lo:g}, {hi:g}]"
    if not parts:
        raise bad(name, text, what + " (an empty set)")
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise bad(name, text, what) from None
    for v in values:
        if not (lo < v <= hi if open_lo else lo <= v <= hi):
            raise bad(name, text, what)
        if percent and abs(float(prompts.percent(v)[:-1]) / 100 - v) > 1e-12:
            raise bad(name, text, what + " that the prompt can show exactly as percentages")
    return values


@dataclass(frozen=True)
class CoinFlipParams(Delivers):
    """Parameters of the coin-flip environment."""

    a0: float = param(1.0, "Beta prior pseudo-count of heads (> 0); the unstated prior")
    b0: float = param(1.0, "Beta prior pseudo-count of tails (> 0); the unstated prior")
    theta: float | None = param(None, "fixed P(heads) in [0, 1]; default: drawn from the prior")
    turns: int = param(10, "number of evidence turns T (>= 1)")
    per_turn: int = param(1, "flips per user message (>= 1)")
    bins: int = param(5, "equal-width bins of the bias probe (2..10)")
    delivery: Literal["single-turn", "multi-turn", "all"] = param(
        "all", "how evidence is delivered"
    )
    prior: Literal["unstated", "stated"] = param(
        "unstated", "stated: each episode draws a Beta prior from prior_means x prior_weights "
        "and states it in words; the oracle conditions on it")
    prior_means: str = param("0.2,0.35,0.5,0.65,0.8",
                             "prior=stated: the first face's average share, comma-separated")
    prior_weights: str = param("2,4,8", "prior=stated: the prior's worth in flips, "
                               "comma-separated")
    stated_as: Literal["share", "counts"] = param(
        "share", "prior=stated: how the prior is told: the first face's average share and its "
        "worth in flips (share), or the flips of each face it is worth, as if already seen "
        "(counts)")
    sides: Literal["heads-tails", "random"] = param(
        "heads-tails", "random: the faces get episode-specific names from the word list")
    words: Literal["a", "b"] = param("a", "sides=random: the word list (a and b are disjoint)")
    summary: Literal["on", "off"] = param(
        "on", "off: single-turn delivery without the printed counts")
    reports: Literal["direct", "noisy"] = param(
        "direct", "noisy: each flip is reported by an observer with a stated reliability; the "
        "oracle marginalises the report noise")
    reliabilities: str = param("0.6,0.7,0.8,0.9,0.95",
                               "reports=noisy: the observers' stated reliabilities in [0.5, 1]")
    changepoint: float = param(0.0, "the stated chance in [0, 1) that the coin is swapped for "
                               "a fresh one before each flip; the oracle is the forward "
                               "recursion over the run length")
    wording: Literal["standard", "paraphrase"] = param(
        "standard", "the template family: standard or a paraphrase of every sentence")
    probes: Literal["both", "next-flip", "bias"] = param(
        "both", "the belief questions each turn asks (both: next-flip, then bias)")

    def __post_init__(self) -> None:
        positive("a0", self.a0)
        positive("b0", self.b0)
        if self.theta is not None and not 0.0 <= self.theta <= 1.0:
            raise bad("theta", self.theta, "a number in [0, 1] or none")
        int_in("turns", self.turns, 1, 1000)
        int_in("per_turn", self.per_turn, 1, 100)
        int_in("bins", self.bins, 2, 10)
        self.stated_priors()
        self.reliability_levels()
        if not 0.0 <= self.changepoint < 1.0:
            raise bad("changepoint", self.changepoint, "a number in [0, 1)")
        if self.changepoint > 0:
            _numbers("changepoint", str(self.changepoint), 0.0, 1.0, percent=True)
        if self.prior == "stated" and (self.a0, self.b0) != (1.0, 1.0):
            raise bad("a0" if self.a0 != 1.0 else "b0", self.a0 if self.a0 != 1.0 else self.b0,
                      "the unstated prior's; prior=stated draws it from prior_means and "
                      "prior_weights")
        if self.stated_as == "counts":
            self._counts_read_back()
        flips = self.turns * self.per_turn
        if (self.reports == "noisy" or self.changepoint > 0) and flips > MAX_FILTERED_FLIPS:
            raise bad("turns", self.turns, f"turns x per_turn <= {MAX_FILTERED_FLIPS} with "
                      "noisy reports or a changepoint")

    def stated_priors(self) -> tuple[tuple[float, float], ...]:
        """Every (mean, weight) a stated prior is drawn from."""
        means = _numbers("prior_means", self.prior_means, 0.0, 1.0, open_lo=True, percent=True)
        if any(m >= 1.0 for m in means):
            raise bad("prior_means", self.prior_means, "numbers in (0, 1)")
        weights = _numbers("prior_weights", self.prior_weights, 0.0, 1e6, open_lo=True)
        return tuple((m, w) for m in means for w in weights)

    def _counts_read_back(self) -> None:
        """Every stated prior's pseudo-counts print as numbers that read back exactly."""
        for mean, weight in self.stated_priors():
            for x in (mean * weight, (1.0 - mean) * weight):
                if float(prompts.number(round(x, 12))) != round(x, 12):
                    raise bad("prior_weights", self.prior_weights,
                              f"weights whose counts print exactly (mean {mean} gives {x!r})")

    def reliability_levels(self) -> tuple[float, ...]:
        """The observers' reliabilities."""
        return _numbers("reliabilities", self.reliabilities, 0.5, 1.0, percent=True)


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


@dataclass(frozen=True)
class Draw:
    """One episode's latent draw: its setting, prior, coins and reports."""

    setting: Setting
    a0: float
    b0: float
    theta: float
    """The bias of the first coin."""
    thetas: tuple[float, ...]
    """The bias of the coin that landed each flip."""
    flips: tuple[int, ...]
    """Each flip's face (1: the first face), as it landed."""
    reports: tuple[Report, ...]
    texts: tuple[str, ...]
    """Each report as told."""

    @property
    def faces(self) -> list[int]:
        """The reported face of each flip (1: the first face)."""
        return [r.face for r in self.reports]


def draw_episode(p: CoinFlipParams, seed: int, index: int) -> Draw:
    """Episode ``index``'s draw. The flips come from ``default_rng([seed, index])`` exactly as
    without any variant (a stated prior draws its prior first, swaps draw as they happen);
    face names and observers come from streams of their own, so ``sides`` and ``reports``
    relabel the same flips."""
    rng = np.random.default_rng([seed, index])
    a0, b0, stated = p.a0, p.b0, None
    if p.prior == "stated":
        options = p.stated_priors()
        stated = options[int(rng.integers(len(options)))]
        a0, b0 = round(stated[0] * stated[1], 12), round((1.0 - stated[0]) * stated[1], 12)
    theta = p.theta if p.theta is not None else float(rng.beta(a0, b0))
    n = p.turns * p.per_turn
    if p.changepoint > 0:
        thetas, flips = _swapping_flips(rng, theta, a0, b0, p.changepoint, n)
    else:
        thetas, flips = [theta] * n, [int(x) for x in rng.random(n) < theta]
    faces: tuple[str, str] = ("heads", "tails")
    if p.sides == "random":
        words = prompts.WORD_LISTS[p.words]
        i, j = np.random.default_rng([seed, index, 1]).choice(len(words), 2, replace=False)
        faces = (words[int(i)], words[int(j)])
    setting = Setting(faces=faces, prior=stated, hazard=p.changepoint,
                      noisy=p.reports == "noisy", wording=p.wording, prior_form=p.stated_as)
    reports, texts = _reports(p, setting, flips, np.random.default_rng([seed, index, 2]))
    return Draw(setting, a0, b0, theta, tuple(thetas), tuple(flips), reports, texts)


def _swapping_flips(rng: np.random.Generator, theta: float, a0: float, b0: float,
                    hazard: float, n: int) -> tuple[list[float], list[int]]:
    thetas, flips = [], []
    for i in range(n):
        if i and rng.random() < hazard:
            theta = float(rng.beta(a0, b0))
        thetas.append(theta)
        flips.append(int(rng.random() < theta))
    return thetas, flips


def _reports(p: CoinFlipParams, setting: Setting, flips: Sequence[int],
             rng: np.random.Generator) -> tuple[tuple[Report, ...], tuple[str, ...]]:
    """Each flip as reported: itself, or an observer's report of it (an observer per
    reliability level, named at random; each report's observer drawn at random)."""
    if not setting.noisy:
        return (tuple(Report(f) for f in flips),
                tuple(prompts.report_text(setting, f) for f in flips))
    levels = p.reliability_levels()
    names = [prompts.OBSERVERS[int(i)]
             for i in rng.choice(len(prompts.OBSERVERS), len(levels), replace=False)]
    reports, texts = [], []
    for f in flips:
        who = int(rng.integers(len(levels)))
        said = f if rng.random() < levels[who] else 1 - f
        reports.append(Report(said, levels[who]))
        texts.append(prompts.report_text(setting, said, names[who], levels[who]))
    return tuple(reports), tuple(texts)


def single_message(setting: Setting, texts: Sequence[str], faces: Sequence[int],
                   per_turn: int, summary: bool = True) -> Message:
    """The single-turn message after the reports ``texts``: each turn's reports marked, and
    the counts (``summary``) marked as a summary."""
    head = prompts.intro(setting) + "\n"
    if not texts:
        return Message("user", head + prompts.nothing_yet(setting))
    sep = prompts.separator(setting)
    counts: list[str | Marked] = (
        [" ", Marked(prompts.summary(setting, faces), "summary")] if summary else [])
    return Message.of("user", head + prompts.results_lead(setting, multi=False),
                      *prompts.reports_marked(texts, per_turn, 1, sep), *counts, ".")


@register
class CoinFlip(Configured[CoinFlipParams]):
    """Coin flip with a Beta(a0, b0) prior on the bias; probes: next flip and binned bias.

    Each episode draws a bias (or uses the fixed ``theta``), flips ``turns * per_turn``
    times and reveals ``per_turn`` flips per user message. Oracles are the exact
    Beta-Bernoulli posterior predictive and posterior bin masses.

    Variants, each with its exact oracle: ``prior=stated`` (a prior drawn per episode and
    stated in words), ``sides=random`` (faces named from a word list), ``summary=off`` (no
    counts in single-turn delivery), ``reports=noisy`` (observers of stated reliability
    report the flips) and ``changepoint=H`` (the coin may be swapped before each flip); see
    :mod:`belieflens.envs.coin_flip.posterior`.

    Parameters are the fields of :class:`CoinFlipParams`. Each turn asks two probes per
    delivery: ``next-flip`` (outcomes: the first face, the second) and ``bias`` (``bins``
    equal-width bins of the first face's probability); in a cache file their beliefs have
    dims ``(delivery, probe, episode, turn, outcome)``.

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
        """A copy whose oracles weight the evidence by ``strength``: each report's likelihood
        is raised to the power ``strength`` (without swaps or noise, after ``h`` heads in
        ``n`` flips the posterior is Beta(a0 + S·h, b0 + S·(n − h)))."""
        if not strength > 0:
            raise ParameterError(f"option '--temper' = {strength!r} is not allowed: a number > 0")
        new = copy.copy(self)
        new._strength = float(strength)
        return new

    def statistic_features(self, episode: Episode) -> dict[str, np.ndarray]:
        """The statistic baselines' features of ``episode`` (:mod:`.statistics`)."""
        return statistics.features(episode, self._params)

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes; episode ``i`` draws from ``np.random.default_rng([seed, i])``
        (:func:`draw_episode`)."""
        for i in range(n):
            yield self._episode(i, draw_episode(self._params, seed, i))

    def oracles(self, draw: Draw) -> list[tuple[tuple[float, float], tuple[float, ...]]]:
        """(next flip, bias bins) at every turn of ``draw`` (turn 0: the prior)."""
        p, s = self._params, self._strength
        per = p.per_turn
        if not draw.setting.noisy and draw.setting.hazard == 0:
            out = []
            for t in range(p.turns + 1):
                seen = draw.faces[: t * per]
                heads, n_seen = s * sum(seen), s * len(seen)
                out.append((next_flip_oracle(draw.a0, draw.b0, heads, n_seen),
                            bias_oracle(draw.a0, draw.b0, heads, n_seen, p.bins)))
            return out
        every = beliefs(draw.a0, draw.b0, draw.reports, hazard=draw.setting.hazard,
                        strength=s, bins=p.bins)
        return every[::per]

    def _episode(self, index: int, draw: Draw) -> Episode:
        p, setting = self._params, draw.setting
        per, sep = p.per_turn, prompts.separator(setting)
        first_intro = prompts.intro(setting)
        turns = []
        multi: tuple[Message, ...] = (Message("user", first_intro), Message("assistant", ACK))
        labels = setting.faces
        for t, (next_flip, bias) in enumerate(self.oracles(draw)):
            new = draw.texts[(t - 1) * per : t * per] if t else ()
            if t:
                multi = (*multi, Message.of("user", prompts.results_lead(setting, multi=True),
                                            *prompts.reports_marked(new, per, t, sep), "."),
                         Message("assistant", ACK))
            messages: dict[Delivery, tuple[Message, ...]] = {
                "single-turn": (single_message(setting, draw.texts[: t * per],
                                               draw.faces[: t * per], per,
                                               summary=p.summary == "on"),),
                "multi-turn": multi,
            }
            probes: list[Probe] = []
            for delivery in p.deliveries:
                ctx = messages[delivery]
                if p.probes != "bias":
                    probes.append(mcq_probe("next-flip", ctx,
                                            prompts.next_flip_question(setting), labels,
                                            next_flip, delivery))
                if p.probes != "next-flip":
                    probes.append(mcq_probe("bias", ctx, prompts.bias_question(setting),
                                            bin_labels(p.bins), bias, delivery))
            turns.append(Turn(index=t, observation=sep.join(new),
                              messages={d: messages[d] for d in p.deliveries},
                              probes=tuple(probes)))
        return Episode(index=index, turns=tuple(turns), truth=self._truth(draw))

    def _truth(self, draw: Draw) -> dict[str, float | str]:
        """The episode's latent values: the first coin's bias, and per variant the prior, the
        faces and the swaps."""
        p = self._params
        truth: dict[str, float | str] = {"theta": draw.theta}
        if p.prior == "stated":
            truth.update(a0=draw.a0, b0=draw.b0)
        if p.sides == "random":
            truth.update(first_face=draw.setting.faces[0], second_face=draw.setting.faces[1])
        if p.changepoint > 0:
            truth.update(theta_last=draw.thetas[-1],
                         swaps=float(sum(a != b for a, b in zip(draw.thetas, draw.thetas[1:],
                                                                 strict=False))))
        return truth
