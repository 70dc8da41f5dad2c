"""ProteinWorld: identify a fictional protein class from a sequence of experiments.

Two presets. ``preset=paper`` (the default) is From Prompts to Posteriors, App. F.3
and Sec. 5.2: 8 classes with 8 attributes, means ``N(0, 1)`` per class and attribute, 6
experiments on distinct attributes (``simple``: variances ``0.1 + |N(0, 1)|`` and each
experiment reveals the exact value; ``hard``: standard deviations ``0.1 + |N(0, 1)|``, as
F.3.1 draws them there, autoregressive attributes and the noisy observation models, Gaussian,
Uniform and Bernoulli through a sigmoid), ``T = 6``,
a uniform prior, and every class the true class once per world (episode ``i`` plays
class ``i mod 8`` of world ``i div 8``: 40 episodes are the paper's 5 worlds x 8 runs);
the world is written as App. A.1 writes it. ``preset=belieflens`` is the project's
earlier variant (4 classes, 3 attributes each measured with Gaussian noise, a random
prior the true class is drawn from). Every parameter can override its preset's value.
The default is the published protocol because a study should reproduce the source
before departing from it; the earlier variant stays reachable by name.

Each episode has a world (:mod:`belieflens.envs.protein_world.world`), a true
class and a seeded experiment sequence; the model reads
the world, the prior and the results so far, and is asked which class the
proteins belong to (MCQ over the classes, oracle: the passive exact posterior)
and which experiment to run next (MCQ over the experiments, no oracle: the
model's choice is read out; the max-EIG choice is in the episode's ``truth``).

The sequence is the model's own under the paper preset (``sequence=model``, §4.2 and App.
F.3.4: "We use the LLM to update beliefs and choose experiments", by expected information
gain): at each step the experiment of largest EIG under the model's own belief p_LLM, which
the paper reads as its verbalised posterior, the stated read-out of that turn (App. F.3.2;
the same read-out the episode records), with the world's likelihoods (:mod:`.choice`); a
stated reply that does not parse falls back to the seeded draw, recorded
(``truth["choice_source_k"]``) and reported. ``sequence=model-revealed`` chooses the same way
under the model's debiased revealed belief (the ``class`` MCQ of the single-turn context,
scored under every rotation by the bound model -- ``belieflens extract`` binds the evaluated
model); ``sequence=model-mcq`` by the ``next-experiment`` MCQ, answered greedily under every
rotation and decided by the rotations' votes (a choice no rotation parses falls back to the
seeded draw, recorded). Or the sequence is seeded (``random`` or ``cycle``, the
``belieflens`` preset's ``random``), or the active oracle's (``active``).

Beside the revealed read-out (the ``class`` MCQ's option log-probs) the paper preset records
the stated posterior of App. F.3.2 (``stated=sampled``, :mod:`.stated`): at each turn the
model writes a distribution over the classes, sampled at τ = 1.0 and parsed, in
``truth["stated_k_c"]`` (NaN when no reply parsed), ``truth["stated_valid_k"]`` and
``truth["stated_sum_k"]``; ``unparsed`` says whether an unparsed reply is retried twice
(``retry``, the paper's) or only counted (``count``). Its prompt is the paper's template: the
world in the system prompt, the prior as the user's turn ("You can assume that initially,
this probability distribution over the protein classes held: ..."), then the history.
``truth`` also records, per step ``k``, the active experimenter's posterior on
the true class (``p_active_true_k``), for the downstream gap
``p_active(theta*) - p_model(theta*)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from belieflens.envs.protein_world.choice import (
    Choice,
    eig_choice,
    mcq_choice,
    revealed_belief,
    stated_belief,
)
from belieflens.envs.protein_world.oracle import (
    ExperimentGrid,
    active_run,
    best_experiment,
    eig,
    experiment_grids,
    posterior,
)
from belieflens.envs.protein_world.report import protein_world_section
from belieflens.envs.protein_world.stated import stated_posterior
from belieflens.envs.protein_world.world import World, exact_text, generate_world, measure
from belieflens.envs.registry import register
from belieflens.episodes.base import Configured, Episode, Marked, Message, Probe, Turn
from belieflens.episodes.capabilities import GeneratorBinding
from belieflens.episodes.delivery import Delivers, require_generator
from belieflens.episodes.generation import OptionScorer, derive_seed
from belieflens.episodes.params import bad, int_in, param, positive
from belieflens.episodes.questions import mcq_probe
from belieflens.errors import BeliefLensError
from belieflens.report.section import SectionFn
from belieflens.types import Delivery

ACK = "Understood."
CLASS_Q = "Which class do you believe the proteins belong to?"
"""The class MCQ: it asks for the model's belief, not for the most likely class (an argmax)."""
NEXT_Q = "Which experiment should be run next to find out the class as quickly as possible?"
DECIMALS = 2
"""Results are shown (and conditioned on) rounded to this many decimals (``belieflens``
preset; the ``paper`` preset shows 4, as App. A.1 states its parameters)."""

Preset = Literal["paper", "belieflens"]
"""``paper``: From Prompts to Posteriors, App. F.3 (the default); ``belieflens``: the
project's earlier, richer variant (noisy measurements of every attribute, a random prior,
the true class drawn from it)."""

PRESETS: dict[str, dict[str, object]] = {
    "paper": {"classes": 8, "attributes": 8, "experiments": 6, "steps": 6, "spread": 1.0,
              "decimals": 4, "scales": {"simple": "drawn", "hard": "drawn-sd"},
              "prior": "uniform", "truth": "each-class",
              "observation": {"simple": "exact", "hard": "mixed"}, "sequence": "model",
              "stated": "sampled"},
    "belieflens": {"classes": 4, "attributes": 3, "experiments": 0, "steps": 5, "spread": 2.0,
                   "decimals": DECIMALS, "scales": {"simple": "fixed", "hard": "fixed"},
                   "prior": "random", "truth": "prior",
                   "observation": {"simple": "gaussian", "hard": "gaussian"}, "sequence": "random",
                   "stated": "off"},
}
"""What each preset puts in place of a parameter left at its ``0`` / ``auto`` default
(``experiments`` 0 under ``belieflens``: one per attribute)."""

MODEL_SEQUENCES = ("model", "model-revealed", "model-mcq")
"""The sequences the model chooses (they need a bound generator)."""

_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


@dataclass(frozen=True)
class ProteinWorldParams(Delivers):
    """Parameters of the ProteinWorld environment.

    Numeric parameters left at 0 and options left at ``auto`` take the preset's value
    (:data:`PRESETS`); after construction every field holds the value in use.
    """

    preset: Literal["paper", "belieflens"] = param(
        "paper",
        "paper: From Prompts to Posteriors App. F.3 (8 classes, 8 attributes, 6 experiments, "
        "T = 6, each class the truth once per world); belieflens: the earlier richer variant",
    )
    classes: int = param(0, "number of protein classes |Θ| (2..10; 0 = preset: paper 8, "
                            "belieflens 4)")
    attributes: int = param(0, "latent attributes per class J (2..8; 0 = preset: paper 8, "
                               "belieflens 3)")
    experiments: int = param(0, "available experiments |Ξ|, each observing a distinct attribute "
                                "(1..attributes; 0 = preset: paper min(6, J), belieflens J)")
    steps: int = param(0, "experiments per episode T (1..50; 0 = preset: paper 6, belieflens 5)")
    difficulty: Literal["simple", "hard"] = param(
        "simple", "simple: independent Gaussian attributes (closed form); hard: autoregressive "
        "attributes, Monte Carlo likelihood"
    )
    observation: Literal["auto", "exact", "gaussian", "uniform", "bernoulli", "mixed"] = param(
        "auto",
        "observation model of the experiments: the exact value, y ~ N(a, sigma^2), "
        "y ~ Uniform(a - sigma, a + sigma), y ~ Bernoulli(sigmoid(a)), or mixed (cycling "
        "gaussian, uniform, bernoulli); auto = paper: exact (simple) / mixed (hard), "
        "belieflens: gaussian",
    )
    scales: Literal["auto", "drawn", "drawn-sd", "fixed"] = param(
        "auto", "attribute variances: drawn 0.1 + |N(0, 1)| per class and attribute (F.3.1's "
                "simple worlds), drawn-sd (the sd is 0.1 + |N(0, 1)|: F.3.1's hard worlds, and "
                "App. A.1's example), or fixed tau^2; auto = paper: drawn (simple) / drawn-sd "
                "(hard), belieflens: fixed"
    )
    spread: float = param(0.0, "sd of the class means around 0 (> 0; 0 = preset: paper 1, "
                               "belieflens 2)")
    tau: float = param(1.0, "within-class sd of each attribute under scales=fixed (> 0)")
    sigma: float = param(0.5, "noise of the gaussian and uniform observation models (0.1..10)")
    rho: float = param(1.5, "autoregressive coupling of the hard worlds (-5..5)")
    mc_samples: int = param(2000, "Monte Carlo samples per class, hard worlds (100..100000)")
    decimals: int = param(0, "decimals of the shown results (1..8; 0 = preset: paper 4, "
                             "belieflens 2)")
    prior: Literal["auto", "random", "uniform"] = param(
        "auto", "prior over classes p0; auto = paper: uniform, belieflens: random"
    )
    truth: Literal["auto", "each-class", "prior"] = param(
        "auto", "the true class: each-class (episode i plays class i mod K of world i div K, so "
                "every class is the truth once per world) or drawn from the prior; auto = "
                "paper: each-class, belieflens: prior"
    )
    sequence: Literal["auto", "random", "cycle", "active", "model", "model-revealed",
                      "model-mcq"] = param(
        "auto",
        "experiment sequence: seeded uniform, round robin, the max-EIG oracle's, the model's: "
        "max EIG under its stated posterior (model, App. F.3.2 / F.3.4: needs stated=sampled) "
        "or under its debiased revealed belief (model-revealed), or its answers to the "
        "next-experiment MCQ over all rotations (model-mcq); auto = paper: model, belieflens: "
        "random",
    )
    stated: Literal["auto", "sampled", "off"] = param(
        "auto", "the stated posterior of App. F.3.2 (verbalised, sampled at τ = 1.0, parsed) "
                "beside the revealed read-out; auto = paper: sampled, belieflens: off",
    )
    unparsed: Literal["retry", "count"] = param(
        "retry", "a stated reply that does not parse: retry (twice more with another seed, "
                 "App. F.3.2, then counted) or count (counted at once); never dropped",
    )
    stated_tokens: int = param(160, "max new tokens of a stated posterior (16..2048)")
    delivery: Literal["single-turn", "multi-turn", "all"] = param(
        "all", "how evidence is delivered"
    )

    def __post_init__(self) -> None:
        preset = PRESETS[self.preset]
        fill = object.__setattr__
        for name in ("classes", "attributes", "steps", "spread", "decimals"):
            if getattr(self, name) == 0:
                fill(self, name, preset[name])
        for name in ("prior", "truth", "sequence", "stated"):
            if getattr(self, name) == "auto":
                fill(self, name, "sampled" if name == "stated" and self.sequence == "model"
                     else preset[name])
        for name in ("scales", "observation"):
            if getattr(self, name) == "auto":
                by_difficulty = preset[name]
                assert isinstance(by_difficulty, dict)
                fill(self, name, by_difficulty[self.difficulty])
        if self.sequence == "model" and self.stated == "off":
            raise bad("sequence", self.sequence, "model chooses under the stated posterior, "
                      "which stated=off leaves out: stated=sampled, or sequence=model-revealed")
        int_in("classes", self.classes, 2, 10)
        int_in("attributes", self.attributes, 2, 8)
        if self.experiments == 0:
            default = preset["experiments"]
            assert isinstance(default, int)
            fill(self, "experiments", min(default, self.attributes) if default else
                 self.attributes)
        int_in("experiments", self.experiments, 1, self.attributes)
        int_in("steps", self.steps, 1, 50)
        positive("spread", self.spread)
        positive("tau", self.tau)
        if not 0.1 <= self.sigma <= 10:
            raise bad("sigma", self.sigma, "a number in 0.1..10")
        if not -5 <= self.rho <= 5:
            raise bad("rho", self.rho, "a number in -5..5")
        int_in("mc_samples", self.mc_samples, 100, 100_000)
        int_in("decimals", self.decimals, 1, 8)
        int_in("stated_tokens", self.stated_tokens, 16, 2048)


def _paper_style(world: World) -> bool:
    """Whether ``world`` is written as the paper writes it."""
    return world.style == "paper"


def experiment_label(world: World, j: int) -> str:
    """The MCQ label of experiment ``j``, e.g. ``measure thermal stability`` or
    ``reveal the exact value of Helix-Torsion Index``."""
    ex = world.experiments[j]
    name = world.attributes[ex.attribute]
    if not _paper_style(world):
        return f"measure {name}"
    return {
        "exact": f"reveal the exact value of {name}",
        "gaussian": f"measure {name} with Gaussian noise",
        "uniform": f"measure {name} with uniform noise",
        "bernoulli": f"run the binary test on {name}",
    }[ex.observation]


def experiment_text(world: World, j: int) -> str:
    """What experiment ``j`` does, as the paper's experiment list states it (App. A.1)."""
    ex = world.experiments[j]
    name = world.attributes[ex.attribute]
    s = exact_text(world.sigma)
    return {
        "exact": f"Reveals the exact value of attribute {name}.",
        "gaussian": f"Reveals a noisy value of attribute {name}: y ~ N(a, σ²) with a the "
                    f"attribute's value and σ = {s}.",
        "uniform": f"Reveals a noisy value of attribute {name}: y ~ Uniform(a - σ, a + σ) with "
                   f"a the attribute's value and σ = {s}.",
        "bernoulli": f"Reveals 1 with probability sigmoid(a) = 1 / (1 + exp(-a)) and 0 otherwise, "
                     f"with a the value of attribute {name}.",
    }[ex.observation]


def _count(n: int) -> str:
    return _NUMBERS[n] if n < len(_NUMBERS) else str(n)


def prior_text(world: World) -> str:
    """The prior over the classes as stated to the model: App. F.3.2's "You can assume that
    initially, this probability distribution over the protein classes held: ..." (``paper``
    style), or the earlier wording in percentages."""
    if _paper_style(world):
        return ("You can assume that initially, this probability distribution over the protein "
                "classes held: " + ", ".join(f"{c}: {exact_text(p)}" for c, p in zip(
                    world.classes, world.prior, strict=True)) + ".")
    return ("Before any experiment, the probability of each class is: "
            + ", ".join(f"{c} {round(p * 100)}%" for c, p in zip(world.classes, world.prior,
                                                                 strict=True)) + ".")


def describe_world(world: World, *, prior: bool = True) -> str:
    """The world, its generative model and (``prior``) the prior, as stated to the model.

    Every number the oracle uses is written exactly (the stated parameters are the
    parameters used). Without ``prior`` it is the system prompt of the stated posterior,
    whose template gives the prior as the user's turn (App. F.3.2, :mod:`.stated`)."""
    if _paper_style(world):
        return _describe_paper(world, prior=prior)
    tau = exact_text(float(world.sds[0, 0]))
    lines = [
        "We are studying proteins from a fictional world. There are "
        f"{len(world.classes)} protein classes: {', '.join(world.classes)}. "
        "All the proteins we test come from one unknown class.",
    ]
    if prior:
        lines.append(prior_text(world))
    attrs = ", ".join(world.attributes)
    if world.difficulty == "simple":
        lines.append(
            f"Each protein has the attributes {attrs}. For a protein of a given class, each "
            f"attribute is normally distributed around the class mean with standard deviation "
            f"{tau}."
        )
    else:
        lines.append(
            f"Each protein has the attributes {attrs}, generated in this order. For a protein "
            f"of a given class, the first attribute is normally distributed around the class "
            f"mean with standard deviation {tau}; each later attribute equals the class "
            f"mean plus {exact_text(world.rho)} times tanh of the previous attribute's value, "
            f"plus normal noise with standard deviation {tau}."
        )
    fixed = bool(np.all(world.variances == world.variances[0, 0]))
    if not fixed:
        lines[-1] = lines[-1].replace(f"with standard deviation {tau}",
                                      "with the class's standard deviation")
    models = {e.observation for e in world.experiments}
    if models == {"gaussian"}:
        lines.append("Each experiment measures one attribute of a new protein, with normal "
                     f"measurement noise of standard deviation {exact_text(world.sigma)}. "
                     "The class means are:")
    else:
        lines.append("Each experiment observes one attribute of a new protein:")
        lines += [f"- {experiment_text(world, e)}" for e in range(len(world.experiments))]
        lines.append("The class means are:")
    for c, row in enumerate(world.means):
        vals = ", ".join(f"{a} {float(m):.1f}" for a, m in zip(world.attributes, row, strict=True))
        if not fixed:
            vals += "; variances " + ", ".join(f"{a} {float(v):.4f}" for a, v in
                                             zip(world.attributes, world.variances[c],
                                                 strict=True))
        lines.append(f"- {world.classes[c]}: {vals}")
    return "\n".join(lines)


def _describe_paper(world: World, *, prior: bool) -> str:
    """The world as App. A.1 of From Prompts to Posteriors writes it, then (``prior``) the
    prior."""
    j = len(world.attributes)
    lines = [
        f"Existing Proteins: {', '.join(world.classes)}.",
        "",
        "Latent Attribute Distribution",
        f"Every protein possesses {_count(j)} continuous latent attributes: "
        f"a = [{', '.join(world.attributes)}].",
    ]
    if world.difficulty == "simple":
        lines.append(
            "Each attribute is conditionally independent and distributed according to: "
            "A | Protein ~ N(μ_Protein, σ²_Protein) where the distribution parameters (μ, σ²) "
            "per protein and attribute are specified in Table 1."
        )
    else:
        lines.append(
            "Attributes are autoregressively conditioned on preceding attributes according to: "
            "a_1 | Protein ~ N(μ_Protein,1, σ²_Protein,1) and, for j > 1, "
            "a_j | Protein, a_(j-1) ~ N(μ_Protein,j + ρ·tanh(a_(j-1)), σ²_Protein,j) with "
            f"ρ = {exact_text(world.rho)}, where the distribution parameters (μ, σ²) per protein "
            "and attribute are specified in Table 1."
        )
    lines += [
        "",
        "Table 1: Latent attribute mean (μ) and variance (σ²) parameters per protein.",
        "Attribute | Protein | Mean (μ) | Variance (σ²)",
    ]
    for i, attr in enumerate(world.attributes):
        for c, cls in enumerate(world.classes):
            lines.append(f"{attr} | {cls} | {float(world.means[c, i]):.4f} | "
                         f"{float(world.variances[c, i]):.4f}")
    lines += [
        "",
        "Experiments",
        "The environment provides the following experiments to observe results based on the "
        "latent attributes:",
    ]
    lines += [f"- {experiment_text(world, e)}" for e in range(len(world.experiments))]
    lines.append(f"Every experiment runs on a new protein. Continuous results are reported "
                 f"rounded to {world.decimals} decimals.")
    if prior:
        lines += ["", prior_text(world)]
    return "\n".join(lines)


def result_text(world: World, step: int, j: int, y: float) -> str:
    """One experiment's result as stated to the model (to the world's decimals)."""
    if not _paper_style(world):
        name = world.attributes[world.experiments[j].attribute]
        return f"Experiment {step}: {name} measured {y:.{world.decimals}f}."
    shown = (str(int(y)) if world.experiments[j].observation == "bernoulli"
             else f"{y:.{world.decimals}f}")
    return f"Experiment {step}: {experiment_label(world, j)}. Result: {shown}."


@register
class ProteinWorld(Configured[ProteinWorldParams], GeneratorBinding):
    """Sequential Bayesian experiments on procedurally generated protein worlds.

    Probes per turn: ``class`` (MCQ over the classes asking for the model's belief, oracle:
    exact posterior; for
    ``hard`` worlds the likelihood is Monte Carlo and ``truth["oracle_se_max"]``
    bounds its standard error) and ``next-experiment`` (MCQ over the experiments,
    no oracle; ``truth["best_experiment_k"]`` is the max-EIG choice at turn k and
    ``truth["eig_k_j"]`` the expected information gain of experiment j there, in nats).

    Parameters are the fields of its ``Params`` record. Beliefs have dims ``(delivery, probe,
    episode, turn, outcome)``; the outcomes of ``class`` are the world's classes.

    The published protocol needs a model (the model chooses the experiments and states its
    posterior); the seeded sequence without the stated read-out does not.

    Examples:
        >>> belieflens.envs.get("protein-world").requires_generator
        True
        >>> env = belieflens.envs.get("protein-world", sequence="random", stated="off")
        >>> episode = next(env.episodes(1, seed=0))
        >>> len(episode.turns), [p.name for p in episode.turns[1].probes][:2]
        (7, ['class', 'next-experiment'])
        >>> round(sum(episode.turns[1].probes[0].oracle), 6)
        1.0
    """

    name = "protein-world"
    Params = ProteinWorldParams
    sections: ClassVar[tuple[SectionFn, ...]] = (protein_world_section,)
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: ProteinWorldParams) -> None:
        self._params = params
        self._last_world: tuple[tuple[int, int], World, tuple[ExperimentGrid, ...]] | None = None

    @property
    def requires_generator(self) -> bool:
        """Whether the experiment sequence is the model's own (``sequence=model``,
        ``model-revealed`` or ``model-mcq``) or the stated posterior is read
        (``stated=sampled``)."""
        return self._params.sequence in MODEL_SEQUENCES or self._params.stated == "sampled"

    def _need(self) -> str:
        """What needs the generator, for the error that none is bound."""
        seq = self._params.sequence
        return f"sequence={seq}" if seq in MODEL_SEQUENCES else "stated=sampled"

    def _scorer(self) -> OptionScorer:
        """The bound generator as the scorer of ``sequence=model-revealed``'s revealed
        belief."""
        gen = require_generator("sequence=model-revealed", self._generator, self.name)
        if not isinstance(gen, OptionScorer):
            raise BeliefLensError(
                "protein-world: sequence=model-revealed needs a generator that also scores "
                "read-outs (a loaded model, or a replay of a protein-world file); "
                "sequence=model (under the stated posterior) or model-mcq "
                "asks the model in text instead")
        return gen

    def model_choice(self, world: World, history: list[tuple[int, float]], intro: str,
                     grids: tuple[ExperimentGrid, ...], fallback: int, at: tuple[int, int]
                     ) -> Choice:
        """The model's choice of the next experiment after ``history`` (:mod:`.choice`):
        by EIG under its revealed belief (``sequence=model-revealed``) or by the MCQ
        (``model-mcq``); ``at`` is ``(seed, episode index)``."""
        k = len(history)
        text = single_message(world, intro, history).content
        if self._params.sequence == "model-revealed":
            probe = mcq_probe("class", (Message("user", text),), CLASS_Q, world.classes, None,
                              "single-turn")
            return eig_choice(revealed_belief(self._scorer(), probe), grids, fallback, k,
                              source="eig-revealed")
        gen = require_generator("sequence=model-mcq", self._generator, self.name)
        labels = [experiment_label(world, j) for j in range(len(world.experiments))]
        return mcq_choice(gen, text + "\n\n", NEXT_Q, labels, fallback, k, derive_seed(*at))

    def world(self, rng: np.random.Generator) -> World:
        """Draw a world with this environment's parameters."""
        p = self._params
        if p.observation == "auto" or p.scales == "auto":  # resolved by the parameters
            raise AssertionError("unresolved parameters")
        style: Preset = p.preset
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
            style=style,
            scales=p.scales,
            experiments=p.experiments,
            observation=p.observation,
            decimals=p.decimals,
        )

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes; episode ``i`` uses ``np.random.default_rng([seed, i])``.

        Under ``truth=each-class`` episode ``i`` plays class ``i mod K`` of world ``i div K``,
        drawn from ``np.random.default_rng([seed, i div K, 1])`` (so the worlds, like the
        episodes, depend only on the seed and the index).
        """
        for job in self.episode_jobs(n, seed):
            yield from job

    def episode_jobs(self, n: int, seed: int) -> list[Iterator[Episode]]:
        """One job per episode (:meth:`episodes`): episodes share nothing but the world drawn
        last (a cache), so those that generate may run together, their generations batched."""
        if self.requires_generator:
            require_generator(self._need(), self._generator, self.name)
        return [self._job(i, seed) for i in range(n)]

    def _job(self, index: int, seed: int) -> Iterator[Episode]:
        yield self._episode(index, np.random.default_rng([seed, index]), seed)

    def _episode(self, index: int, rng: np.random.Generator, seed: int = 0) -> Episode:
        p = self._params
        world_index, world, truth, grids = self._world_of(index, rng, seed)
        active = active_run(world, truth, p.steps, np.random.default_rng([*_seed(rng), 1]),
                            grids=grids)
        intro = describe_world(world)
        n_exp = len(world.experiments)
        experiments = tuple(experiment_label(world, j) for j in range(n_exp))
        info: dict[str, float | str] = {}
        stated: dict[int, dict[str, float | str]] = {}  # turn -> its stated read-out's truth
        if p.sequence == "active":
            history = list(zip(active.experiments, active.observations, strict=True))
        else:
            history = self._history(world, truth, intro, grids, rng, (seed, index), info,
                                    stated)
        info |= {
            "theta": world.classes[truth],
            "theta_index": float(truth),
            "world": float(world_index),
            "difficulty": world.difficulty,
            "observations": ",".join(e.observation for e in world.experiments),
            "experiments": ",".join(str(j) for j, _ in history),
        }
        multi: tuple[Message, ...] = (Message("user", intro), Message("assistant", ACK))
        se_max = 0.0
        turns = []
        for t in range(p.steps + 1):
            seen = history[:t]
            if t:
                j, y = history[t - 1]
                multi = (*multi, Message.of("user", Marked(result_text(world, t, j, y),
                                                           "evidence", t)),
                         Message("assistant", ACK))
            post = posterior(world, seen)
            se_max = max(se_max, *post.se)
            info[f"p_active_true_{t}"] = active.posteriors[t][truth]
            if p.stated == "sampled" and t not in stated:
                stated[t] = self._stated(world, seen, t, derive_seed(seed, index))
            info |= stated.get(t, {})
            messages: dict[Delivery, tuple[Message, ...]] = {
                "single-turn": (single_message(world, intro, seen),),
                "multi-turn": multi,
            }
            turns.append(self._turn(t, world, history, messages, post.probs, experiments))
            if t < p.steps:
                info[f"best_experiment_{t}"] = experiments[best_experiment(post.probs, grids)]
                for e, g in enumerate(grids):
                    info[f"eig_{t}_{e}"] = eig(post.probs, g)
        info["oracle_se_max"] = se_max
        return Episode(index=index, turns=tuple(turns), truth=info)

    def _stated(self, world: World, seen: list[tuple[int, float]], t: int,
                seed: int) -> dict[str, float | str]:
        """Turn ``t``'s stated posterior (:mod:`.stated`) as truth entries."""
        gen = require_generator("stated=sampled", self._generator, self.name)
        results = [result_text(world, k + 1, j, y) for k, (j, y) in enumerate(seen)]
        got = stated_posterior(gen, describe_world(world, prior=False), prior_text(world),
                               results, world.classes, seed=seed, turn=t,
                               policy=self._params.unparsed,
                               max_new_tokens=self._params.stated_tokens)
        probs = got.probs or (float("nan"),) * len(world.classes)
        out: dict[str, float | str] = {f"stated_{t}_{c}": v for c, v in enumerate(probs)}
        out[f"stated_valid_{t}"] = float(got.probs is not None)
        out[f"stated_sum_{t}"] = got.raw_sum
        out[f"stated_attempts_{t}"] = float(len(got.replies))
        return out

    def _world_of(
        self, index: int, rng: np.random.Generator, seed: int
    ) -> tuple[int, World, int, tuple[ExperimentGrid, ...]]:
        """Episode ``index``'s world (its index, the world, the true class, its grids).

        Under ``truth=each-class`` K consecutive episodes share a world, drawn (with its
        grids) once; otherwise the world and the true class are drawn from ``rng``.
        """
        p = self._params
        if p.truth != "each-class":
            world = self.world(rng)
            truth = int(rng.choice(len(world.classes), p=np.asarray(world.prior)))
            return index, world, truth, experiment_grids(world)
        world_index, truth = divmod(index, p.classes)
        cached = self._last_world
        if cached is not None and cached[0] == (seed, world_index):
            return world_index, cached[1], truth, cached[2]
        world = self.world(np.random.default_rng([seed, world_index, 1]))
        grids = experiment_grids(world)
        self._last_world = ((seed, world_index), world, grids)
        return world_index, world, truth, grids

    def _history(
        self, world: World, truth: int, intro: str, grids: tuple[ExperimentGrid, ...],
        rng: np.random.Generator, at: tuple[int, int], info: dict[str, float | str],
        stated: dict[int, dict[str, float | str]],
    ) -> list[tuple[int, float]]:
        """The ``random``, ``cycle``, ``model``, ``model-revealed`` or ``model-mcq`` sequence
        of experiments and their results (the seeded draw is made at every step, so the
        results' draws are the same whoever chooses). ``at`` is ``(seed, episode index)``; the
        model's choices record how they were made in ``info`` (:mod:`.choice`), and
        ``sequence=model`` leaves in ``stated`` the stated read-out of each turn it chose on."""
        n_exp = len(world.experiments)
        sequence = self._params.sequence
        history: list[tuple[int, float]] = []
        for k in range(self._params.steps):
            fallback = int(rng.integers(n_exp))
            if sequence == "cycle":
                j = k % n_exp
            elif sequence == "model":
                stated[k] = self._stated(world, history, k, derive_seed(*at))
                choice = eig_choice(stated_belief(stated[k], len(world.classes), k), grids,
                                    fallback, k, source="eig-stated")
                info |= choice.truth
                j = choice.experiment
            elif sequence in ("model-revealed", "model-mcq"):
                choice = self.model_choice(world, history, intro, grids, fallback, at)
                info |= choice.truth
                j = choice.experiment
            else:
                j = fallback
            history.append((j, measure(world, truth, j, rng)))
        return history

    def _turn(
        self, t: int, world: World, history: list[tuple[int, float]],
        messages: dict[Delivery, tuple[Message, ...]], probs: tuple[float, ...],
        experiments: tuple[str, ...],
    ) -> Turn:
        """Turn ``t``: the class probe (oracle ``probs``) and, before the last, next-experiment."""
        p = self._params
        probes: list[Probe] = []
        for d in p.deliveries:
            probes.append(mcq_probe("class", messages[d], CLASS_Q, world.classes, probs, d))
            if t < p.steps:
                probes.append(mcq_probe("next-experiment", messages[d], NEXT_Q,
                                        experiments, None, d))
        return Turn(
            index=t,
            observation=result_text(world, t, *history[t - 1]) if t else "",
            messages={d: messages[d] for d in p.deliveries},
            probes=tuple(probes),
        )


def single_message(world: World, intro: str, seen: list[tuple[int, float]]) -> Message:
    """The single-turn context after the results ``seen``: the world, then each result on its
    own line, result ``k`` marked as turn ``k``'s evidence."""
    if not seen:
        return Message("user", f"{intro}\n\nNo experiments yet.")
    pieces: list[str | Marked] = [f"{intro}\n\n"]
    for k, (j, y) in enumerate(seen):
        pieces += ["\n" if k else "", Marked(result_text(world, k + 1, j, y), "evidence", k + 1)]
    return Message.of("user", *pieces)


def _seed(rng: np.random.Generator) -> tuple[int, int]:
    """Two integers drawn from ``rng`` to seed a derived generator."""
    a, b = rng.integers(0, 2**31, size=2)
    return int(a), int(b)
