"""ProteinWorld: identify a fictional protein class from a sequence of noisy experiments.

Each episode draws a world (:mod:`belieflens.envs.protein_world.world`), a true
class from the stated prior and a seeded experiment sequence; the model reads
the world, the prior and the results so far, and is asked which class the
proteins belong to (MCQ over the classes, oracle: the passive exact posterior)
and which experiment to run next (MCQ over the experiments, no oracle: the
model's choice is read out; the max-EIG choice is in the episode's ``truth``).

The sequence is seeded (``sequence=random`` or ``cycle``), the active oracle's
(``active``), or the model's own (``model``: at each step the bound generator --
``belieflens extract`` binds the evaluated model -- answers the next-experiment MCQ
greedily after the single-turn context; a reply naming no option falls back to
the seeded draw and ``truth["model_choice_valid_k"]`` is 0).
``truth`` also records, per step ``k``, the active experimenter's posterior on
the true class (``p_active_true_k``), for the downstream gap
``p_active(theta*) - p_model(theta*)``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Literal, Self

import numpy as np

from belieflens.envs.base import Episode, Message, Probe, Turn
from belieflens.envs.delivery import require_generator
from belieflens.envs.generation import TextGenerator, derive_seed
from belieflens.envs.params import bad, param
from belieflens.envs.protein_world.oracle import (
    active_run,
    best_experiment,
    eig,
    experiment_grids,
    posterior,
)
from belieflens.envs.protein_world.world import World, generate_world, measure
from belieflens.envs.questions import LETTERS, mcq_probe, mcq_text
from belieflens.types import Delivery, SectionName

ACK = "Understood."
CLASS_Q = "Which class do the proteins most likely belong to?"
NEXT_Q = "Which experiment should be run next to find out the class as quickly as possible?"
DECIMALS = 2
"""Measurements are stated (and conditioned on) rounded to this many decimals."""


@dataclass(frozen=True)
class ProteinWorldParams:
    """Parameters of the ProteinWorld environment."""

    classes: int = param(4, "number of protein classes |Θ| (2..10)")
    attributes: int = param(3, "latent attributes per class J, one experiment each (2..8)")
    steps: int = param(5, "experiments per episode (1..50)")
    difficulty: Literal["simple", "hard"] = param(
        "simple", "simple: Gaussian attributes; hard: autoregressive, Monte Carlo likelihood"
    )
    spread: float = param(2.0, "sd of the class means around 0 (> 0)")
    tau: float = param(1.0, "within-class sd of each attribute (> 0)")
    sigma: float = param(0.5, "measurement noise sd (0.1..10)")
    rho: float = param(1.5, "autoregressive coupling of the hard worlds (-5..5)")
    mc_samples: int = param(2000, "Monte Carlo samples per class, hard worlds (100..100000)")
    prior: Literal["random", "uniform"] = param("random", "prior over classes p0")
    sequence: Literal["random", "cycle", "active", "model"] = param(
        "random",
        "experiment sequence: seeded uniform, round robin, the max-EIG oracle's, or the "
        "model's own greedy MCQ choices",
    )
    delivery: Literal["single-turn", "multi-turn", "all"] = param(
        "all", "how evidence is delivered"
    )

    def __post_init__(self) -> None:
        if not 2 <= self.classes <= 10:
            raise bad("classes", self.classes, "an integer in 2..10")
        if not 2 <= self.attributes <= 8:
            raise bad("attributes", self.attributes, "an integer in 2..8")
        if not 1 <= self.steps <= 50:
            raise bad("steps", self.steps, "an integer in 1..50")
        if not self.spread > 0:
            raise bad("spread", self.spread, "a number > 0")
        if not self.tau > 0:
            raise bad("tau", self.tau, "a number > 0")
        if not 0.1 <= self.sigma <= 10:
            raise bad("sigma", self.sigma, "a number in 0.1..10")
        if not -5 <= self.rho <= 5:
            raise bad("rho", self.rho, "a number in -5..5")
        if not 100 <= self.mc_samples <= 100_000:
            raise bad("mc_samples", self.mc_samples, "an integer in 100..100000")

    @property
    def deliveries(self) -> tuple[Delivery, ...]:
        """The deliveries this run uses."""
        if self.delivery == "all":
            return ("single-turn", "multi-turn")
        return (self.delivery,)


def experiment_label(world: World, j: int) -> str:
    """The MCQ label of experiment ``j``, e.g. ``measure thermal stability``."""
    return f"measure {world.attributes[j]}"


def describe_world(world: World) -> str:
    """The world, its generative model and the prior, as stated to the model."""
    lines = [
        "We are studying proteins from a fictional world. There are "
        f"{len(world.classes)} protein classes: {', '.join(world.classes)}. "
        "All the proteins we test come from one unknown class.",
        "Before any experiment, the probability of each class is: "
        + ", ".join(f"{c} {round(p * 100)}%" for c, p in zip(world.classes, world.prior,
                                                             strict=True))
        + ".",
    ]
    attrs = ", ".join(world.attributes)
    if world.difficulty == "simple":
        lines.append(
            f"Each protein has the attributes {attrs}. For a protein of a given class, each "
            f"attribute is normally distributed around the class mean with standard deviation "
            f"{world.tau:g}."
        )
    else:
        lines.append(
            f"Each protein has the attributes {attrs}, generated in this order. For a protein "
            f"of a given class, the first attribute is normally distributed around the class "
            f"mean with standard deviation {world.tau:g}; each later attribute equals the class "
            f"mean plus {world.rho:g} times tanh of the previous attribute's value, plus normal "
            f"noise with standard deviation {world.tau:g}."
        )
    lines.append(
        "Each experiment measures one attribute of a new protein, with normal measurement "
        f"noise of standard deviation {world.sigma:g}. The class means are:"
    )
    for c, row in zip(world.classes, world.means, strict=True):
        vals = ", ".join(f"{a} {float(m):.1f}" for a, m in zip(world.attributes, row, strict=True))
        lines.append(f"- {c}: {vals}")
    return "\n".join(lines)


def result_text(world: World, step: int, j: int, y: float) -> str:
    """One experiment's result as stated to the model."""
    return f"Experiment {step}: {world.attributes[j]} measured {y:.{DECIMALS}f}."


class ProteinWorld:
    """Sequential Bayesian experiments on procedurally generated protein worlds.

    Probes per turn: ``class`` (MCQ over the classes, oracle: exact posterior; for
    ``hard`` worlds the likelihood is Monte Carlo and ``truth["oracle_se_max"]``
    bounds its standard error) and ``next-experiment`` (MCQ over the experiments,
    no oracle; ``truth["best_experiment_k"]`` is the max-EIG choice at turn k and
    ``truth["eig_k_j"]`` the expected information gain of experiment j there, in nats).
    """

    name = "protein-world"
    Params = ProteinWorldParams
    sections: ClassVar[tuple[SectionName, ...]] = ("protein-world",)
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: ProteinWorldParams) -> None:
        self._params = params
        self._generator: TextGenerator | None = None

    @property
    def requires_generator(self) -> bool:
        """Whether the experiment sequence is the model's own (``sequence=model``)."""
        return self._params.sequence == "model"

    def bind_generator(self, generator: TextGenerator) -> Self:
        """A copy whose ``sequence=model`` choices come from ``generator`` (greedy)."""
        new = copy.copy(self)
        new._generator = generator
        return new

    def model_choice(self, context: str, n_experiments: int, seed: int) -> int | None:
        """The experiment the bound generator picks by letter after ``context``, or ``None``.

        The question is the ``next-experiment`` MCQ in its first rotation; the reply's
        first standalone letter among the options is the choice.
        """
        gen = require_generator("sequence=model", self._generator, self.name)
        reply = gen((Message("user", context),), seed=seed, max_new_tokens=4, temperature=0.0)
        letters = LETTERS[:n_experiments]
        found = re.search(rf"\b([{letters}])\b", reply)
        return None if found is None else letters.index(found.group(1))

    @property
    def params(self) -> ProteinWorldParams:
        """The validated parameters."""
        return self._params

    def world(self, rng: np.random.Generator) -> World:
        """Draw a world with this environment's parameters."""
        p = self._params
        return generate_world(
            rng,
            classes=p.classes,
            attributes=p.attributes,
            difficulty=p.difficulty,
            spread=p.spread,
            tau=p.tau,
            sigma=p.sigma,
            rho=p.rho,
            mc_samples=p.mc_samples,
            uniform_prior=p.prior == "uniform",
        )

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes; episode ``i`` uses ``np.random.default_rng([seed, i])``."""
        if self.requires_generator:
            require_generator("sequence=model", self._generator, self.name)
        for i in range(n):
            yield self._episode(i, np.random.default_rng([seed, i]), seed)

    def _episode(self, index: int, rng: np.random.Generator, seed: int = 0) -> Episode:
        p = self._params
        world = self.world(rng)
        truth = int(rng.choice(len(world.classes), p=np.asarray(world.prior)))
        grids = experiment_grids(world)
        active = active_run(world, truth, p.steps, np.random.default_rng([*_seed(rng), 1]),
                            decimals=DECIMALS, grids=grids)
        intro = describe_world(world)
        classes = world.classes
        experiments = tuple(experiment_label(world, j) for j in range(p.attributes))
        info: dict[str, float | str] = {}
        if p.sequence == "active":
            history = list(zip(active.experiments, active.observations, strict=True))
        else:
            history = []
            for k in range(p.steps):
                fallback = int(rng.integers(p.attributes))
                if p.sequence == "cycle":
                    j = k % p.attributes
                elif p.sequence == "model":
                    so_far = "\n".join(result_text(world, i + 1, a, y)
                                       for i, (a, y) in enumerate(history))
                    context = intro + "\n\n" + (so_far or "No experiments yet.") + "\n\n"
                    choice = self.model_choice(context + mcq_text(NEXT_Q, experiments),
                                               p.attributes, derive_seed(seed, index, k))
                    info[f"model_choice_valid_{k}"] = float(choice is not None)
                    j = fallback if choice is None else choice
                else:
                    j = fallback
                history.append((j, round(measure(world, truth, j, rng), DECIMALS)))
        info |= {
            "theta": classes[truth],
            "theta_index": float(truth),
            "difficulty": world.difficulty,
            "experiments": ",".join(str(j) for j, _ in history),
        }
        multi: tuple[Message, ...] = (Message("user", intro), Message("assistant", ACK))
        se_max = 0.0
        turns = []
        for t in range(p.steps + 1):
            seen = history[:t]
            if t:
                j, y = history[t - 1]
                multi = (*multi, Message("user", result_text(world, t, j, y)),
                         Message("assistant", ACK))
            results = [result_text(world, k + 1, j, y) for k, (j, y) in enumerate(seen)]
            single = intro + "\n\n" + ("\n".join(results) if results else "No experiments yet.")
            messages: dict[Delivery, tuple[Message, ...]] = {
                "single-turn": (Message("user", single),),
                "multi-turn": multi,
            }
            post = posterior(world, seen)
            se_max = max(se_max, *post.se)
            info[f"p_active_true_{t}"] = active.posteriors[t][truth]
            probes: list[Probe] = []
            for d in p.deliveries:
                probes.append(mcq_probe("class", messages[d], CLASS_Q, classes, post.probs, d))
                if t < p.steps:
                    probes.append(mcq_probe("next-experiment", messages[d], NEXT_Q,
                                            experiments, None, d))
            if t < p.steps:
                info[f"best_experiment_{t}"] = experiments[best_experiment(post.probs, grids)]
                for e, g in enumerate(grids):
                    info[f"eig_{t}_{e}"] = eig(post.probs, g)
            turns.append(
                Turn(
                    index=t,
                    observation=result_text(world, t, *history[t - 1]) if t else "",
                    messages={d: messages[d] for d in p.deliveries},
                    probes=tuple(probes),
                )
            )
        info["oracle_se_max"] = se_max
        return Episode(index=index, turns=tuple(turns), truth=info)


def _seed(rng: np.random.Generator) -> tuple[int, int]:
    """Two integers drawn from ``rng`` to seed a derived generator."""
    a, b = rng.integers(0, 2**31, size=2)
    return int(a), int(b)
