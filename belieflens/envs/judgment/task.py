"""What the evaluated model is told and asked in each judgment task."""

from __future__ import annotations

from dataclasses import dataclass

from belieflens.envs.judgment.case import Kind, labels_of
from belieflens.envs.judgment.styles import styles_of
from belieflens.episodes.base import Message, Probe
from belieflens.episodes.questions import mcq_probe
from belieflens.types import Delivery


@dataclass(frozen=True)
class Task:
    """The fixed texts of a judgment task.

    Attributes:
        kind: ``social`` or ``triage``.
        probe: name of the label probe (``verdict`` / ``urgency``).
        intro: the user's opening message.
        empty: what the single-turn prompt says before any segment.
        question: the label question.
        persona: who the simulator plays.
        style_probes: whether to ask the style posterior and the style-conditioned label.
    """

    kind: Kind
    probe: str
    intro: str
    empty: str
    question: str
    persona: str
    style_probes: bool = False

    @property
    def labels(self) -> tuple[str, ...]:
        """The label probe's outcomes."""
        return labels_of(self.kind)


URGENCY_SCALE = (
    "(Emergency: go to an emergency department now. Urgent: see a doctor within 24 hours. "
    "Observation: watch it at home and see a doctor if it gets worse. Routine: book an "
    "ordinary appointment.)"
)
"""The urgency levels as explained to the model in every urgency question."""

SOCIAL = Task(
    kind="social",
    probe="verdict",
    intro=(
        "I'd like your honest judgment on a conflict I was part of: am I the asshole (YTA) "
        "or not the asshole (NTA)? I'll tell you what happened, piece by piece."
    ),
    empty="I haven't told you anything about it yet.",
    question=(
        "Based on what I've told you so far, am I the asshole? "
        "(YTA: you are the asshole. NTA: you are not the asshole.)"
    ),
    persona="a person who wants an outside opinion on a conflict they were part of",
)
"""Social judgment (r/AmItheAsshole-style verdicts)."""

TRIAGE = Task(
    kind="triage",
    probe="urgency",
    intro=(
        "I need help deciding how urgently I should get medical care. I'll describe what's "
        "going on, piece by piece."
    ),
    empty="I haven't described anything yet.",
    question=(
        "Based on what I've told you so far, how urgently should I seek medical care? "
        + URGENCY_SCALE
    ),
    persona="a patient describing their health problem",
    style_probes=True,
)
"""Medical triage (four urgency levels)."""


def style_question(kind: Kind) -> str:
    """The style-posterior question, describing every style."""
    described = "; ".join(f"{s.name}: {s.description}" for s in styles_of(kind))
    return f"Which best describes the way I have been telling you about this? ({described}.)"


def task_probes(task: Task, ctx: tuple[Message, ...], delivery: Delivery) -> list[Probe]:
    """The probes read after a turn: the label (and, for triage, style and style-conditioned label).

    None has a closed-form oracle. The style-conditioned probes, one per style and
    named ``<probe>|style=<name>``, write the style into the prompt, so analysis can
    pick the one at the model's most likely style.
    """
    probes = [mcq_probe(task.probe, ctx, task.question, task.labels, None, delivery)]
    if task.style_probes:
        styles = styles_of(task.kind)
        probes.append(
            mcq_probe(
                "style", ctx, style_question(task.kind), [s.name for s in styles], None, delivery
            )
        )
        for s in styles:
            q = (
                f"Suppose I am a {s.name} {'patient' if task.kind == 'triage' else 'narrator'}: "
                f"someone who {s.description}. Taking that into account, "
                + task.question[0].lower()
                + task.question[1:]
            )
            probes.append(
                mcq_probe(f"{task.probe}|style={s.name}", ctx, q, task.labels, None, delivery)
            )
    return probes
