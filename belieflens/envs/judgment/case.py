"""A judgment case: an ordered storyboard of clean segments with a ground-truth label."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["social", "triage"]
"""Which judgment task a case belongs to."""

SOCIAL_LABELS: tuple[str, ...] = ("YTA", "NTA")
"""Verdicts of social judgment: you are / are not the asshole."""

TRIAGE_LABELS: tuple[str, ...] = ("Emergency", "Urgent", "Observation", "Routine")
"""Urgency levels of medical triage, most to least urgent (an ordinal scale)."""


def labels_of(kind: Kind) -> tuple[str, ...]:
    """The outcome labels of a task."""
    return SOCIAL_LABELS if kind == "social" else TRIAGE_LABELS


@dataclass(frozen=True)
class Segment:
    """One clean piece of the story, in the user's words."""

    id: str
    category: str
    content: str


@dataclass(frozen=True)
class Case:
    """A storyboard with its ground truth.

    Attributes:
        id: the case identifier (unique within a case set).
        label: the ground-truth verdict or urgency.
        segments: the story, in delivery order.
        title: a short title (metadata; not shown to the model).
        meta: extra text fields, e.g. ``self_diagnosis`` or ``specialty`` for triage.
    """

    id: str
    label: str
    segments: tuple[Segment, ...]
    title: str = ""
    meta: dict[str, str] = field(default_factory=dict)
