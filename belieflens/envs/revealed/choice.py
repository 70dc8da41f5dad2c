"""Choice: picking one of 2, 4 or 6 lettered options, all stated to be equally likely."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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


def paper_choice_points(
    setup: str, labels: tuple[str, ...], probs: tuple[Fraction, ...],
    truth: Mapping[str, float | str], variant: Literal["regular", "independent"],
    previous: str,
) -> Iterator[GridPoint]:
    """The paper's wording (App. C) of a person choosing at random among ``labels``: one
    choice (``regular``), or a second, independent one after each stated first choice
    (whose observation is ``previous`` and the label)."""
    ask = "What is the probability that the person chooses option {outcome}"
    if variant == "regular":
        yield GridPoint(setup, "The person chooses at random option", f"{ask}?", labels,
                        probs, "", truth, "paper")
        return
    for prev in labels:
        yield GridPoint(
            f"{setup} The person first chooses at random option {prev}.",
            "Then the person performs another random choice and chooses option",
            f"{ask} in the second choice?", labels, probs, f"{previous} {prev}",
            {**truth, "previous": prev}, "paper",
        )


def choice_points(
    variant: ChoiceVariant, k: int, style: Style = "belieflens"
) -> Iterator[GridPoint]:
    """The grid points of one variant and number of options, in grid order."""
    letters = tuple("ABCDEF"[:k])
    dist = categorical([1] * k)
    if style == "paper":
        setup = (f"A person has to choose randomly between {k} options. The options are "
                 f"{_listing(letters)}. All possible options are equally likely.")
        base: dict[str, float | str] = {
            "scenario": "choice", "variant": variant, "options": float(k), "previous": "",
        }
        yield from paper_choice_points(setup, letters, dist.probs, base, variant, "previous pick")
        return
    setup = (
        f"I pick one of the options {_listing(letters)} at random; each option is equally "
        "likely to be picked."
    )
    truth: dict[str, float | str] = {
        "scenario": "choice", "variant": variant, "options": float(k), "previous": "",
    }
    if variant == "regular":
        yield GridPoint(setup, "I pick option", "What is the probability that I pick option "
                        "{outcome}?", letters, dist.probs, "", truth)
        return
    for prev in letters:
        yield GridPoint(
            f"{setup} Last time I picked option {prev}. Now I pick again; this pick does not "
            "depend on the last one.",
            "This time I pick option",
            "What is the probability that I pick option {outcome} this time?",
            letters, dist.probs, f"previous pick {prev}", {**truth, "previous": prev},
        )
