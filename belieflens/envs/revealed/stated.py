"""The stated-answer read-out: an MCQ over five candidate probabilities.

The scenario is followed by a question about one outcome's probability and five
candidates labelled ``[[A]]`` ... ``[[E]]``; the answer is read as the bracketed
letter continuing ``Answer:``. The probe is asked under the five cyclic rotations
of :func:`belieflens.envs.latin.latin_square` so position bias can be pooled away.

Design: the probe's **outcomes are the five candidates**, labelled by their
probability text (e.g. ``16.7%``) and sorted by value, so the correct candidate's
index varies from question to question. The probe's ``oracle`` is ``None``: a
candidate is either right or wrong, and a one-hot "distribution" would make every
divergence to it infinite or meaningless. The correct candidate is recorded in
the episode's truth instead (``stated_correct``: its outcome index,
``stated_answer``: its label, ``stated_p``: the exact probability), which is what
accuracy needs (argmax of the debiased letter distribution == ``stated_correct``)
and what pairs with the revealed probe's belief in ``target``.

Distractors are drawn from an explicit ``np.random.Generator``: deterministic in
its seed, rounded to 0.1 percentage points, and at least ``min_gap`` points away
from the correct value and from each other, so no candidate ever duplicates
another (neither in value nor in text).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from belieflens.envs.base import Message, Probe, Query
from belieflens.envs.latin import latin_square
from belieflens.types import Delivery, PromptFormat

N_CANDIDATES = 5
"""Number of candidate probabilities in a stated-answer question."""

LETTERS = "ABCDE"
"""Letters of the candidate positions, shown as ``[[A]]`` ... ``[[E]]``."""

INSTRUCTION = "Answer with the letter of the correct option in double brackets."
"""The line after the candidates."""

PREFILL = "Answer:"
"""Text the answer continues; the options are `` [[A]]`` ... `` [[E]]``."""

SCALE = 1000
"""Candidates are integers in tenths of a percentage point: 0..1000."""


@dataclass(frozen=True)
class Candidates:
    """Five candidate probabilities in tenths of a percent, ascending, one of them correct."""

    tenths: tuple[int, ...]
    correct: int

    def __post_init__(self) -> None:
        if len(set(self.tenths)) != len(self.tenths) or list(self.tenths) != sorted(self.tenths):
            raise ValueError(f"candidates must be distinct and ascending, got {self.tenths!r}")
        if not 0 <= self.correct < len(self.tenths):
            raise ValueError("correct candidate index out of range")

    @property
    def labels(self) -> tuple[str, ...]:
        """Each candidate as text, e.g. ``16.7%``."""
        return tuple(percent_text(t) for t in self.tenths)


def to_tenths(p: Fraction | float) -> int:
    """A probability in tenths of a percent, rounded half up."""
    x = Fraction(p) * SCALE
    if not 0 <= x <= SCALE:
        raise ValueError(f"not a probability: {p!r}")
    return int(x + Fraction(1, 2))


def percent_text(tenths: int) -> str:
    """``167`` -> ``16.7%``."""
    return f"{tenths // 10}.{tenths % 10}%"


def distractors(
    correct: int, rng: np.random.Generator, *, k: int = N_CANDIDATES - 1, min_gap: int = 10
) -> tuple[int, ...]:
    """``k`` wrong candidates (tenths of a percent) for the ``correct`` one.

    Half the draws are near misses (the correct value scaled by ``2**u``,
    ``u ~ U(-2, 2)``), half uniform on ``0..1000``; a draw is kept only if it is
    at least ``min_gap`` tenths from the correct value and from every kept one.
    """
    if not 0 <= correct <= SCALE:
        raise ValueError(f"correct candidate {correct} outside 0..{SCALE}")
    if (k + 1) * min_gap > SCALE // 2:
        raise ValueError("too many distractors for this gap")
    kept: list[int] = []
    for _ in range(10_000):
        if rng.random() < 0.5:
            d = round(max(correct, 1) * 2.0 ** float(rng.uniform(-2.0, 2.0)))
        else:
            d = int(rng.integers(0, SCALE + 1))
        if 0 <= d <= SCALE and all(abs(d - x) >= min_gap for x in (correct, *kept)):
            kept.append(d)
            if len(kept) == k:
                return tuple(kept)
    raise RuntimeError("distractor sampling did not converge")  # pragma: no cover


def candidates(p: Fraction | float, rng: np.random.Generator) -> Candidates:
    """The correct probability ``p`` and four distractors, sorted ascending."""
    correct = to_tenths(p)
    values = sorted((correct, *distractors(correct, rng)))
    return Candidates(tuple(values), values.index(correct))


def stated_text(question: str, shown: tuple[str, ...]) -> str:
    """The question, the candidates in ``shown`` order as ``[[A]] 16.7%`` lines, the instruction."""
    lines = [question, *(f"[[{LETTERS[j]}]] {label}" for j, label in enumerate(shown))]
    return "\n".join([*lines, INSTRUCTION])


def stated_probe(
    scenario: str,
    question: str,
    cands: Candidates,
    fmt: PromptFormat,
    delivery: Delivery = "single-turn",
    *,
    name: str = "stated",
) -> Probe:
    """The stated-answer probe: one query per cyclic rotation of the five candidates.

    ``raw``: the whole text followed by ``Answer:`` is the prompt; ``chat``: the
    scenario and question are the user's turn and ``Answer:`` is the prefill.
    The probe's oracle is ``None`` (see the module docstring).
    """
    labels = cands.labels
    k = len(labels)
    square = latin_square(k)
    queries = []
    for r in range(k):
        row = tuple(int(o) for o in square[r])
        body = f"{scenario}\n{stated_text(question, tuple(labels[o] for o in row))}"
        queries.append(
            Query(
                messages=(Message("user", body),),
                prefill=f"{body}\n{PREFILL}" if fmt == "raw" else PREFILL,
                options=tuple(f" [[{LETTERS[j]}]]" for j in range(k)),
                outcome=row,
                rotation=r,
                format=fmt,
            )
        )
    return Probe(
        name=name, labels=labels, oracle=None, queries=tuple(queries), delivery=delivery, kind="mcq"
    )
