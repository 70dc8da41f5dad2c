"""Building one judgment episode: passive (clean segments) or active (simulated, styled)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from belieflens.envs.judgment.case import Case
from belieflens.envs.judgment.styles import Style, steering
from belieflens.envs.judgment.task import Task, task_probes
from belieflens.episodes.base import Episode, Turn
from belieflens.episodes.delivery import conversations, require_generator
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
        sim = require_generator("engagement=active", generation.simulator, env)
        results = simulate_case(
            task,
            case,
            style,
            clean,
            simulator=sim,
            seeds=[derive_seed(seed, index, 2, t) for t in range(len(clean))],
            settings=generation.simulation,
            retries=generation.retries,
        )
        texts = [r.text if r.text is not None else c for r, c in zip(results, clean, strict=True)]
        failed = [seg.id for seg, r in zip(segments, results, strict=True) if not r.ok]
        truth["sim_failures"] = float(len(failed))
        truth["sim_failed"] = ",".join(failed)
        truth["sim_attempts"] = float(sum(len(r.attempts) for r in results))
        truth["sim_log"] = json.dumps(
            [
                {
                    "segment": seg.id,
                    "ok": r.ok,
                    "attempts": [{"seed": a.seed, "raw": a.raw} for a in r.attempts]
                    if not r.ok
                    else [{"seed": a.seed} for a in r.attempts],
                }
                for seg, r in zip(segments, results, strict=True)
            ]
        )
    single = [f"{task.intro}\n\n{task.empty}"] + [
        f"{task.intro}\n\n" + "\n\n".join(texts[:t]) for t in range(1, len(texts) + 1)
    ]
    convs = conversations(
        task.intro,
        texts,
        single,
        deliveries,
        generator=generation.generator,
        settings=generation.reply,
        seeds=[derive_seed(seed, index, 1, t) for t in range(len(texts) + 1)],
        env=env,
    )
    turns = []
    for t in range(len(texts) + 1):
        probes = [p for d in deliveries for p in task_probes(task, convs[t][d], d)]
        turns.append(
            Turn(
                index=t,
                observation=texts[t - 1] if t else "",
                messages=dict(convs[t]),
                probes=tuple(probes),
            )
        )
    return Episode(index=index, turns=tuple(turns), truth=truth)
