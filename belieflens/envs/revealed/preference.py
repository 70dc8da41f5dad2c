"""Preference: a person choosing between two options, one of them favoured."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from belieflens.envs.revealed.choice import PAPER, Wording, random_choice_points
from belieflens.envs.revealed.exact import categorical
from belieflens.envs.revealed.grid import GridPoint, Style

PreferenceVariant = Literal["regular", "independent"]
"""one choice; or a previous choice is stated and a new independent one predicted."""

VARIANTS: tuple[PreferenceVariant, ...] = ("regular", "independent")
"""Variants in grid order."""

PAIRS: dict[str, tuple[str, str]] = {
    "left-right": ("Left", "Right"),
    "heads-tails": ("Heads", "Tails"),
}
"""The option pairs, in their forward order."""

ORDERS = ("forward", "reverse")
"""Whether the pair is presented as listed in :data:`PAIRS` or reversed."""

FOCUSES = ("first", "second")
"""Which presented option is favoured."""

Focus = Literal["canonical", "all", "first", "second"]
"""Which option is favoured: the pair's own first (Left, Heads; the paper's), or the first or
second presented, or both in turn (``all``)."""

BIASES = (1, 2, 3)
"""The favoured option is ``bias`` times more likely to be chosen."""


SAM = Wording(
    "Sam chooses", "What is the probability that Sam chooses {outcome}?",
    "Last time, Sam chose {prev}. Now Sam chooses again; this choice does not depend on the "
    "last one.",
    "This time, Sam chooses", "What is the probability that Sam chooses {outcome} this time?",
    "belieflens",
)
"""This toolkit's earlier wording of Sam's choice."""


def preference_points(
    variant: PreferenceVariant, pair: str, order: str, focus: str, bias: int,
    style: Style = "belieflens",
) -> Iterator[GridPoint]:
    """The grid points of one variant and configuration, in grid order.

    ``focus``: ``first`` or ``second`` presented option favoured, or ``canonical``
    (the pair's own first option, Left or Heads, whatever the order).
    """
    shown = PAIRS[pair] if order == "forward" else PAIRS[pair][::-1]
    fav = shown.index(PAIRS[pair][0]) if focus == "canonical" else int(focus == "second")
    favoured, other = shown[fav], shown[1 - fav]
    weights = [bias if i == fav else 1 for i in range(2)]
    dist = categorical(weights)
    truth: dict[str, float | str] = {
        "scenario": "preference", "variant": variant, "pair": pair, "order": order,
        "first": shown[0], "focus": favoured, "bias": float(bias), "previous": "",
    }
    if style == "paper":
        choice = (
            "The choice is fair and each option equally likely to be chosen." if bias == 1
            else f"The choice is biased and option {favoured} is {bias} times more likely to be "
            f"chosen than option {other}."
        )
        options = (f"A person has to choose randomly between two options: {shown[0]} and "
                   f"{shown[1]}.")
        setup = f"{options} {choice}"
    else:
        liking = (
            f"Sam is as likely to choose {favoured} as {other}." if bias == 1
            else f"Sam is {bias} times more likely to choose {favoured} than {other}."
        )
        options = f"Sam has to choose between {shown[0]} and {shown[1]}."
        setup = f"{options} {liking}"
    yield from random_choice_points(setup, shown, dist.probs, truth, variant, "previous choice",
                                    PAPER if style == "paper" else SAM, options)
