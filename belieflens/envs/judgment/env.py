"""The shared machinery of the judgment environments: parameters, case units, episodes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from belieflens.envs.judgment.case import Case, Kind
from belieflens.envs.judgment.cases import load
from belieflens.envs.judgment.episode import Generation, build_episode
from belieflens.envs.judgment.report import judgment_section
from belieflens.envs.judgment.styles import Style, styles_of
from belieflens.envs.judgment.task import SOCIAL, TRIAGE, Task
from belieflens.envs.registry import register
from belieflens.episodes.base import Configured, Episode
from belieflens.episodes.capabilities import SimulatorBinding
from belieflens.episodes.delivery import Delivers, require_generator
from belieflens.episodes.generation import GenerationSettings
from belieflens.episodes.params import bad, check_temperature, int_in, param
from belieflens.report.section import SectionFn


@dataclass(frozen=True)
class JudgmentParams(Delivers):
    """Parameters shared by the judgment environments (subclasses set ``KIND``)."""

    KIND: ClassVar[Kind] = "social"

    cases: str = param(
        "builtin",
        "'builtin' (our shipped cases), a directory of BayesBench storyboard JSON files, "
        "or one JSON file in our format",
    )
    engagement: Literal["passive", "active", "both"] = param(
        "passive",
        "passive: clean segments; active: each segment rewritten in a style by the simulator",
    )
    styles: str = param("all", "comma-separated styles of active episodes, or 'all'")
    delivery: Literal["single-turn", "multi-turn", "multi-turn-self", "all", "all+self"] = param(
        "all", "single-turn, multi-turn, multi-turn-self, all (single and multi) or all+self"
    )
    max_segments: int = param(0, "deliver at most this many segments per case (0 = all)")
    temperature: float = param(0.7, "sampling temperature of generated replies (multi-turn-self)")
    reply_tokens: int = param(96, "max new tokens of a generated reply (multi-turn-self)")
    sim_temperature: float = param(0.7, "sampling temperature of the simulator (active)")
    sim_tokens: int = param(256, "max new tokens of one simulator output (active)")
    sim_retries: int = param(3, "retries with a new seed when the simulator gives no <message> tag")

    def __post_init__(self) -> None:
        if self.cases != "builtin" and not Path(self.cases).exists():
            raise bad(
                "cases",
                self.cases,
                "'builtin', a directory of BayesBench storyboards or a JSON case file",
            )
        _ = self.style_names  # raises on invalid names
        int_in("max_segments", self.max_segments, 0, 1000)
        check_temperature("temperature", self.temperature)
        check_temperature("sim_temperature", self.sim_temperature)
        int_in("reply_tokens", self.reply_tokens, 1, 4096)
        int_in("sim_tokens", self.sim_tokens, 1, 4096)
        int_in("sim_retries", self.sim_retries, 0, 20)

    @property
    def style_names(self) -> tuple[str, ...]:
        """The styles of active episodes, in canonical order."""
        allowed = tuple(s.name for s in styles_of(self.KIND))
        if self.styles.strip() == "all":
            return allowed
        chosen = [s.strip() for s in self.styles.split(",") if s.strip()]
        if not chosen or any(s not in allowed for s in chosen) or len(set(chosen)) != len(chosen):
            raise bad("styles", self.styles, "'all' or distinct names from " + ", ".join(allowed))
        return tuple(s for s in allowed if s in chosen)


class JudgmentEnvironment(Configured[JudgmentParams], SimulatorBinding):
    """Base of the judgment environments; subclasses set ``name``, ``Params`` and ``TASK``.

    Episodes run over units (case, engagement, style): the cases in an order
    permuted by ``seed``, each case passive first (if requested), then active in
    each style. Episode ``i`` is unit ``i % units``; ``truth['repeat']`` counts
    passes beyond the first.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type[JudgmentParams]] = JudgmentParams
    TASK: ClassVar[Task]
    sections: ClassVar[tuple[SectionFn, ...]] = (judgment_section,)
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: JudgmentParams) -> None:
        self._params = params
        self._cases = load(params.cases, self.TASK.kind)

    @property
    def cases(self) -> tuple[Case, ...]:
        """The case set."""
        return self._cases

    @property
    def requires_generator(self) -> bool:
        """Whether these parameters need generated text (multi-turn-self or active engagement)."""
        p = self._params
        return "multi-turn-self" in p.deliveries or p.engagement != "passive"

    @property
    def requires_simulator(self) -> bool:
        """Whether these parameters need a user simulator (active engagement)."""
        return self._params.engagement != "passive"

    def units(self, seed: int) -> list[tuple[Case, Style | None]]:
        """The (case, style) units in episode order; style ``None`` is a passive episode."""
        p = self._params
        order = np.random.default_rng([seed, 0x5EED]).permutation(len(self._cases))
        styles = [s for s in styles_of(self.TASK.kind) if s.name in p.style_names]
        out: list[tuple[Case, Style | None]] = []
        for i in order:
            case = self._cases[int(i)]
            if p.engagement in ("passive", "both"):
                out.append((case, None))
            if p.engagement in ("active", "both"):
                out += [(case, s) for s in styles]
        return out

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes, deterministic in ``seed`` (and in the bound generators)."""
        p = self._params
        if "multi-turn-self" in p.deliveries:
            require_generator("delivery multi-turn-self", self._generator, self.name)
        if p.engagement != "passive":
            require_generator(f"engagement={p.engagement}", self._simulator, self.name)
        return self._episodes(n, seed)

    def _episodes(self, n: int, seed: int) -> Iterator[Episode]:
        for job in self.episode_jobs(n, seed):
            yield from job

    def episode_jobs(self, n: int, seed: int) -> list[Iterator[Episode]]:
        """One job per episode (:meth:`episodes`): episodes share nothing, so those that
        generate may run together, their generations batched."""
        p = self._params
        units = self.units(seed)
        generation = Generation(
            generator=self._generator,
            simulator=self._simulator,
            reply=GenerationSettings(p.temperature, p.reply_tokens),
            simulation=GenerationSettings(p.sim_temperature, p.sim_tokens),
            retries=p.sim_retries,
        )
        return [self._job(i, seed, units, generation) for i in range(n)]

    def _job(self, i: int, seed: int, units: list[tuple[Case, Style | None]],
             generation: Generation) -> Iterator[Episode]:
        p = self._params
        case, style = units[i % len(units)]
        yield build_episode(
            self.TASK,
            case,
            index=i,
            seed=seed,
            style=style,
            deliveries=p.deliveries,
            max_segments=p.max_segments,
            generation=generation,
            env=self.name,
            repeat=i // len(units),
        )


@dataclass(frozen=True)
class SocialJudgmentParams(JudgmentParams):
    """Parameters of the social-judgment environment (styles: neutral, conceding, defending)."""

    KIND: ClassVar[Kind] = "social"


@register
class SocialJudgment(JudgmentEnvironment):
    """Social judgment: the poster tells a conflict segment by segment; probe: the verdict.

    Passive episodes deliver the clean segments; active ones deliver each segment
    as rewritten by a simulator in the neutral, conceding or defending style. The
    verdict (YTA/NTA) is read after every turn; there is no closed-form oracle, so
    analysis measures invariance across styles and accuracy against the label.

    Parameters are the fields of its ``Params`` record. Its probe ``verdict`` (outcomes YTA,
    NTA) has no oracle; beliefs have dims ``(delivery, probe, episode, turn, outcome)``.
    Active engagement needs a simulator (``belieflens extract`` binds one).

    Examples:
        >>> env = belieflens.envs.get("social-judgment")
        >>> episode = next(env.episodes(1, seed=0))
        >>> probe = episode.turns[1].probes[0]
        >>> probe.name, probe.labels, probe.oracle
        ('verdict', ('YTA', 'NTA'), None)
    """

    name: ClassVar[str] = "social-judgment"
    Params: ClassVar[type[JudgmentParams]] = SocialJudgmentParams
    TASK: ClassVar[Task] = SOCIAL


@dataclass(frozen=True)
class MedicalTriageParams(JudgmentParams):
    """Parameters of the medical-triage environment (styles: accurate, hypochondriac, minimizer,
    cyberchondriac)."""

    KIND: ClassVar[Kind] = "triage"


@register
class MedicalTriage(JudgmentEnvironment):
    """Medical triage: a patient describes a problem segment by segment; probe: the urgency.

    Passive episodes deliver the clean segments; active ones deliver each segment as
    rewritten by a simulator in the accurate, hypochondriac, minimizer or
    cyberchondriac style. After every turn: the urgency distribution, the style
    posterior p(z_f | x) and, for each style written into the prompt, the urgency
    given that style (analysis picks the model's most likely one).

    Parameters are the fields of its ``Params`` record. Probes: ``urgency`` (Emergency,
    Urgent, Observation, Routine), ``style`` and ``urgency|style=S``; beliefs have dims
    ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("medical-triage")
        >>> episode = next(env.episodes(1, seed=0))
        >>> [p.name for p in episode.turns[1].probes][:2]
        ['urgency', 'style']
        >>> episode.turns[1].probes[0].labels
        ('Emergency', 'Urgent', 'Observation', 'Routine')
    """

    name: ClassVar[str] = "medical-triage"
    Params: ClassVar[type[JudgmentParams]] = MedicalTriageParams
    TASK: ClassVar[Task] = TRIAGE
