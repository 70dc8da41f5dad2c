"""Building one judgment episode: passive (clean segments) or active (simulated, styled)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from belieflens.envs.judgment.case import Case
from belieflens.envs.judgment.styles import Style, steering
from belieflens.envs.judgment.task import Task, task_probes
from belieflens.episodes.base import Episode, Marked, marked
from belieflens.episodes.delivery import conversation_turns, conversations, require_generator
from belieflens.episodes.generation import (
    GenerationSettings,
    SimulatedMessage,
    TextGenerator,
    derive_seed,
    simulate_message,
    steering_prompt,
)
from belieflens.types import Delivery

CLEAN = "clean"
"""The style recorded for passive episodes: the clean segments themselves."""


@dataclass(frozen=True)
class Generation:
    """Everything generated text needs: the models (if bound) and their settings."""

    generator: TextGenerator | None = None
    simulator: TextGenerator | None = None
    reply: GenerationSettings = field(default_factory=lambda: GenerationSettings(0.7, 96))
    simulation: GenerationSettings = field(default_factory=lambda: GenerationSettings(0.7, 256))
    retries: int = 3


def simulate_case(
    task: Task,
    case: Case,
    style: Style,
    segments: Sequence[str],
    *,
    simulator: TextGenerator,
    seeds: Sequence[int],
    settings: GenerationSettings,
    retries: int,
) -> list[SimulatedMessage]:
    """Rewrite each segment in ``style``; each sees the messages already simulated for the case."""
    instruction = steering(style, case)
    previous: list[str] = []
    out = []
    for text, seed in zip(segments, seeds, strict=True):
        prompt = steering_prompt(task.persona, instruction, previous, text)
        result = simulate_message(simulator, prompt, seed=seed, retries=retries, settings=settings)
        out.append(result)
        previous.append(result.text if result.text is not None else text)
    return out


def build_episode(
    task: Task,
    case: Case,
    *,
    index: int,
    seed: int,
    style: Style | None,
    deliveries: Sequence[Delivery],
    max_segments: int,
    generation: Generation,
    env: str,
    repeat: int = 0,
) -> Episode:
    """One episode of ``case``: passive if ``style`` is None, else active in ``style``.

    Active messages come from the simulator; a segment whose simulation failed every
    attempt is delivered as its clean text and the failure is recorded in
    ``truth`` (``sim_failures``, ``sim_failed``, ``sim_log``), never hidden.
    """
    segments = case.segments[: max_segments or None]
    clean = [s.content for s in segments]
    truth: dict[str, float | str] = {
        "case": case.id,
        "label": case.label,
        "label_index": float(task.labels.index(case.label)),
        "engagement": "passive" if style is None else "active",
        "style": CLEAN if style is None else style.name,
        "repeat": float(repeat),
    }
    texts = clean
    if style is not None:
        texts, results = _simulated(task, case, style, clean, at=(seed, index),
                                    generation=generation, env=env)
        truth |= _simulation_record([seg.id for seg in segments], results)
    singles = [marked(f"{task.intro}\n\n{task.empty}")] + [
        marked(f"{task.intro}\n\n", *(p for k in range(t) for p in (
            "\n\n" if k else "", Marked(texts[k], "evidence", k + 1))))
        for t in range(1, len(texts) + 1)
    ]
    convs = conversations(
        task.intro,
        texts,
        [text for text, _ in singles],
        deliveries,
        single_spans=[spans for _, spans in singles],
        generator=generation.generator,
        settings=generation.reply,
        seeds=[derive_seed(seed, index, 1, t) for t in range(len(texts) + 1)],
        env=env,
    )
    turns = conversation_turns(
        convs, texts, lambda t, ctx: [p for d in deliveries for p in task_probes(task, ctx[d], d)]
    )
    return Episode(index=index, turns=turns, truth=truth)


def _simulated(
    task: Task, case: Case, style: Style, clean: list[str], *, at: tuple[int, int],
    generation: Generation, env: str,
) -> tuple[list[str], list[SimulatedMessage]]:
    """The segments as the simulator rewrote them in ``style`` (a failed one: its clean text),
    and the simulation results; ``at`` is ``(seed, episode index)``."""
    sim = require_generator("engagement=active", generation.simulator, env)
    results = simulate_case(
        task,
        case,
        style,
        clean,
        simulator=sim,
        seeds=[derive_seed(*at, 2, t) for t in range(len(clean))],
        settings=generation.simulation,
        retries=generation.retries,
    )
    texts = [r.text if r.text is not None else c for r, c in zip(results, clean, strict=True)]
    return texts, results


def _simulation_record(
    segment_ids: Sequence[str], results: Sequence[SimulatedMessage]
) -> dict[str, float | str]:
    """What ``truth`` records of the simulation: failures, attempts and each attempt's seed
    (and, for a segment that failed, every raw output)."""
    failed = [sid for sid, r in zip(segment_ids, results, strict=True) if not r.ok]
    return {
        "sim_failures": float(len(failed)),
        "sim_failed": ",".join(failed),
        "sim_attempts": float(sum(len(r.attempts) for r in results)),
        "sim_log": json.dumps(
            [
                {
                    "segment": sid,
                    "ok": r.ok,
                    "attempts": [{"seed": a.seed, "raw": a.raw} for a in r.attempts]
                    if not r.ok
                    else [{"seed": a.seed} for a in r.attempts],
                }
                for sid, r in zip(segment_ids, results, strict=True)
            ]
        ),
    }
