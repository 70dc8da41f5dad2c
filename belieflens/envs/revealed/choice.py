"""Choice: picking one of 2, 4 or 6 lettered options, all stated to be equally likely."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from belieflens.envs.revealed.exact import categorical
from belieflens.envs.revealed.grid import GridEnvironment, GridPoint, RevealedParams, Style
from belieflens.episodes.params import bad, param

ChoiceVariant = Literal["regular", "independent"]
"""one pick; or a previous pick is stated and a new independent one predicted."""

VARIANTS: tuple[ChoiceVariant, ...] = ("regular", "independent")
"""Variants in grid order."""

SIZES = (2, 4, 6)
"""Numbers of options in the paper's grid."""


@dataclass(frozen=True)
class ChoiceParams(RevealedParams):
    """Parameters of the choice grid (defaults: the paper's full grid)."""

    options: int | None = param(None, "number of lettered options, one of 2, 4, 6; default: all")
    variant: Literal["all", "regular", "independent"] = param("all", "which variant(s) of the grid")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.options is not None and self.options not in SIZES:
            raise bad("options", self.options, "2, 4, 6 or none")


def _listing(letters: Sequence[str]) -> str:
    return ", ".join(letters[:-1]) + f" and {letters[-1]}"


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
        ask = "What is the probability that the person chooses option {outcome}"
        if variant == "regular":
            yield GridPoint(setup, "The person chooses at random option", f"{ask}?", letters,
                            dist.probs, "", base, style)
            return
        for prev in letters:
            yield GridPoint(
                f"{setup} The person first chooses at random option {prev}.",
                "Then the person performs another random choice and chooses option",
                f"{ask} in the second choice?", letters, dist.probs, f"previous pick {prev}",
                {**base, "previous": prev}, style,
            )
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


class Choice(GridEnvironment[ChoiceParams]):
    """Choice: a uniformly random pick among 2, 4 or 6 options labelled A, B, ...

    Variants: one pick; a previous pick is stated and a new independent pick is
    predicted (every previous pick). Grid order: variant, number of options,
    previous pick.
    """

    name = "choice"
    Params = ChoiceParams

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point the parameters select, in grid order."""
        p = self.params
        variants = VARIANTS if p.variant == "all" else (p.variant,)
        sizes = SIZES if p.options is None else (p.options,)
        return [point for v in variants for k in sizes for point in choice_points(v, k, p.style)]
