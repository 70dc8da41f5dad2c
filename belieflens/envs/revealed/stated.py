"""The stated-answer read-out: an MCQ over five candidate probabilities.

The scenario is followed by a question about one outcome's probability and five
candidates labelled ``[[A]]`` ... ``[[E]]``; the answer is read as the bracketed
letter continuing ``Answer:``. The probe is asked under the five cyclic rotations
of :func:`belieflens.episodes.latin.latin_square` so position bias can be pooled away.

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

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from belieflens.episodes.base import Message, Probe, Span
from belieflens.episodes.questions import rotated_mcq
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


def evidence_spans(text: str, pieces: Sequence[str]) -> tuple[Span, ...]:
    """Each of ``pieces`` found in ``text`` as an evidence span, piece ``i`` turn ``i + 1``'s
    (the options shown, a previous result, an observation)."""
    out = []
    for i, piece in enumerate(pieces):
        at = text.find(piece) if piece else -1
        if at >= 0:
            out.append(Span(at, at + len(piece), "evidence", i + 1))
    return tuple(out)


def stated_probe(scenario: str, question: str, cands: Candidates, fmt: PromptFormat,
                 delivery: Delivery = "single-turn", *, name: str = "stated",
                 evidence: Sequence[str] = ()) -> Probe:
    """The stated-answer probe: one query per cyclic rotation of the five candidates.

    ``raw``: the whole text followed by ``Answer:`` is the prompt; ``chat``: the
    scenario and question are the user's turn and ``Answer:`` is the prefill.
    The probe's oracle is ``None`` (see the module docstring). The ``evidence`` pieces of
    the scenario are marked (:func:`evidence_spans`).
    """
    labels = cands.labels

    def ask(row: tuple[int, ...]) -> tuple[tuple[Message, ...], str]:
        body = f"{scenario}\n{stated_text(question, tuple(labels[o] for o in row))}"
        user = Message("user", body, evidence_spans(body, evidence))
        return (user,), f"{body}\n{PREFILL}" if fmt == "raw" else PREFILL

    options = tuple(f" [[{LETTERS[j]}]]" for j in range(len(labels)))
    return rotated_mcq(name, labels, None, delivery, options, ask, format=fmt)


# --- the paper's stated-answer format (App. C) -------------------------------------------

PAPER_PREAMBLE = (
    "You are given a Scenario, a Question, and a set of possible Answers. Select one Answer as "
    "your reply. The Answers are A, B, C, D, E. Your selected final Answer will be contained "
    "within double square brackets: [[A]], [[B]], [[C]], [[D]], [[E]]."
)
"""The instruction that opens every stated-answer prompt of the paper (App. C)."""

PAPER_ORDER = (0, 1, 4, 2, 3)
"""Candidate order shown under rotation 0 (ascending indices): the paper's dice example shows
``1/12, 1/6, 5/12, 1/4, 1/3``, i.e. ascending candidates in this order."""


def fraction_text(p: Fraction) -> str:
    """A probability as the paper writes it: ``1/12`` (``0`` and ``1`` as integers)."""
    return str(Fraction(p))


@dataclass(frozen=True)
class FractionCandidates:
    """Five candidate probabilities as exact fractions, ascending, one of them correct.

    Attributes:
        values: the candidates, ascending.
        correct: index of the correct one in ``values``.
        denominator: if set, every candidate is written over this common denominator
            (the case study's ``1553/5000``); otherwise each is written reduced (``1/12``).
    """

    values: tuple[Fraction, ...]
    correct: int
    denominator: int | None = None

    def __post_init__(self) -> None:
        if len(set(self.values)) != len(self.values) or list(self.values) != sorted(self.values):
            raise ValueError(f"candidates must be distinct and ascending, got {self.values!r}")
        if not 0 <= self.correct < len(self.values):
            raise ValueError("correct candidate index out of range")
        if any(not 0 <= v <= 1 for v in self.values):
            raise ValueError(f"candidates must be probabilities, got {self.values!r}")

    @property
    def labels(self) -> tuple[str, ...]:
        """Each candidate as text: ``1/12``, or ``1553/5000`` over the common denominator."""
        if self.denominator is None:
            return tuple(fraction_text(v) for v in self.values)
        d = self.denominator
        return tuple(f"{int(v * d)}/{d}" for v in self.values)


def paper_candidates(p: Fraction) -> FractionCandidates:
    """The paper's five candidates for a correct probability ``p``.

    Every stated example of App. C (1/4, 1/4, 1/2, 1/6) shows ``p * k / 3`` for
    ``k = 1..5``. Where ``5p/3`` would exceed 1 (``p > 3/5``, which the paper never
    shows) the candidates are ``p * k / 5`` for ``k = 1..5`` instead, so ``p`` is the
    largest. ``p`` must be positive.
    """
    p = Fraction(p)
    if not 0 < p <= 1:
        raise ValueError(f"a stated question needs a positive probability, got {p}")
    step = p / 3 if 5 * p <= 3 else p / 5
    values = tuple(step * k for k in range(1, 6))
    return FractionCandidates(values, values.index(p))


def case_candidates(
    p: Fraction, group_rates: tuple[Fraction, Fraction], offsets: tuple[Fraction, Fraction]
) -> FractionCandidates:
    """The case study's candidates: the two subgroup rates, the marginal and two near misses.

    The paper's question (anxiety, ``1553/5000``) shows the rate among surgical-ward
    staff (``4250/5000``), among the others (``1150/5000``), the marginal, and two
    near misses at ``+94/5000`` and ``-181/5000`` from it (``offsets``). All are
    written over their least common denominator, as the paper writes them.
    """
    values = sorted({Fraction(p), *group_rates, *(p + o for o in offsets)})
    if len(values) != 5:
        raise ValueError("case-study candidates collide")
    denom = 1
    for v in values:
        denom = denom * v.denominator // np.gcd(denom, v.denominator)
    return FractionCandidates(tuple(values), values.index(Fraction(p)), int(denom))


def paper_stated_probe(scenario: str, question: str, cands: FractionCandidates, fmt: PromptFormat,
                       delivery: Delivery = "single-turn", *, name: str = "stated",
                       system: str | None = None, evidence: Sequence[str] = ()) -> Probe:
    """The paper's stated-answer MCQ, one query per cyclic rotation of the five candidates.

    Text (App. C): :data:`PAPER_PREAMBLE`, ``Scenario: ...``, ``Question: ...``,
    ``Answers:`` and one ``[[A]] 1/12`` line per candidate; rotation 0 shows the
    ascending candidates in :data:`PAPER_ORDER`. With ``system`` (the case study,
    Fig. 2/3a) the background is the system message and the user's turn is the
    question and the answers, without the preamble. ``chat``: the answer is read as
    the first thing the assistant writes (``[[A]]`` ...); ``raw``: the text, then
    ``Answer:`` and `` [[A]]`` .... The ``evidence`` pieces of the scenario are marked
    (:func:`evidence_spans`).
    """
    labels = cands.labels
    chat = fmt == "chat"

    def ask(row: tuple[int, ...]) -> tuple[tuple[Message, ...], str]:
        answers = "\n".join(f"[[{LETTERS[j]}]] {labels[o]}" for j, o in enumerate(row))
        if system is None:
            body = (f"{PAPER_PREAMBLE}\nScenario: {scenario}\nQuestion: {question}\n"
                    f"Answers:\n{answers}")
            user = Message("user", body, evidence_spans(body, evidence))
            return (user,), "" if chat else f"{body}\n{PREFILL}"
        body = f"{question}\n{answers}"
        messages = (Message("system", system), Message("user", body))
        return messages, "" if chat else f"{system}\n{body}\n{PREFILL}"

    options = tuple(f"{'' if chat else ' '}[[{LETTERS[j]}]]" for j in range(len(labels)))
    return rotated_mcq(name, labels, None, delivery, options, ask, format=fmt,
                       order=lambda o: PAPER_ORDER[o])
