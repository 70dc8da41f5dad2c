"""Choice: picking one of 2, 4 or 6 lettered options, all stated to be equally likely."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from belieflens.envs.revealed.exact import categorical
from belieflens.envs.revealed.grid import GridPoint, Style

ChoiceVariant = Literal["regular", "independent"]
"""one pick; or a previous pick is stated and a new independent one predicted."""

VARIANTS: tuple[ChoiceVariant, ...] = ("regular", "independent")
"""Variants in grid order."""

SIZES = (2, 4, 6)
"""Numbers of options in the paper's grid."""


def _listing(letters: Sequence[str]) -> str:
    return ", ".join(letters[:-1]) + f" and {letters[-1]}"


@dataclass(frozen=True)
class Wording:
    """How a random choice is told: the stem and question of one choice, and of a second,
    independent one after a stated first (``before``, with ``{prev}`` for that choice)."""

    stem: str
    question: str
    before: str
    stem_again: str
    question_again: str
    style: Style


_ASK = "What is the probability that the person chooses option {outcome}"

PAPER = Wording(
    "The person chooses at random option", f"{_ASK}?",
    "The person first chooses at random option {prev}.",
    "Then the person performs another random choice and chooses option",
    f"{_ASK} in the second choice?", "paper",
)
"""The paper's wording (App. C), shared by choice and preference."""

BELIEFLENS = Wording(
    "I pick option", "What is the probability that I pick option {outcome}?",
    "Last time I picked option {prev}. Now I pick again; this pick does not depend on the "
    "last one.",
    "This time I pick option", "What is the probability that I pick option {outcome} this time?",
    "belieflens",
)
"""This toolkit's earlier wording of a pick."""


def random_choice_points(
    setup: str, labels: tuple[str, ...], probs: tuple[Fraction, ...],
    truth: Mapping[str, float | str], variant: Literal["regular", "independent"],
    previous: str, wording: Wording, options: str,
) -> Iterator[GridPoint]:
    """A choice at random among ``labels`` after ``setup``: one (``regular``), or a second,
    independent one after each stated first choice (observation: ``previous`` and the
    label). The evidence marked: ``options`` (the piece of ``setup`` that lists the options)
    and the stated first choice."""
    w = wording
    if variant == "regular":
        yield GridPoint(setup, w.stem, w.question, labels, probs, "", truth, w.style,
                        evidence=(options,))
        return
    for prev in labels:
        seen = w.before.format(prev=prev)
        yield GridPoint(
            f"{setup} {seen}", w.stem_again, w.question_again, labels,
            probs, f"{previous} {prev}", {**truth, "previous": prev}, w.style,
            evidence=(options, seen),
        )


def choice_points(
    variant: ChoiceVariant, k: int, style: Style = "belieflens"
) -> Iterator[GridPoint]:
    """The grid points of one variant and number of options, in grid order."""
    letters = tuple("ABCDEF"[:k])
    dist = categorical([1] * k)
    truth: dict[str, float | str] = {
        "scenario": "choice", "variant": variant, "options": float(k), "previous": "",
    }
    if style == "paper":
        options = f"The options are {_listing(letters)}."
        setup = (f"A person has to choose randomly between {k} options. {options} All possible "
                 "options are equally likely.")
    else:
        options = f"I pick one of the options {_listing(letters)}"
        setup = f"{options} at random; each option is equally likely to be picked."
    yield from random_choice_points(setup, letters, dist.probs, truth, variant, "previous pick",
                                    PAPER if style == "paper" else BELIEFLENS, options)
