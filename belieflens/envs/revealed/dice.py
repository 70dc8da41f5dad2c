"""Dice: sums of 1-3 fair dice with 4-12 faces, repeated rolls and observations."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Literal

from belieflens.envs.revealed.exact import Exact, Observation, condition, dice_sum, shift
from belieflens.envs.revealed.grid import GridPoint, Style

DiceVariant = Literal["single", "independent", "dependent", "observation"]
"""single roll; a previous roll then a new independent one; the total of both; observations."""

VARIANTS: tuple[DiceVariant, ...] = ("single", "independent", "dependent", "observation")
"""Variants in grid order."""

DICE = (1, 2, 3)
"""Numbers of dice in the paper's grid."""

FACES = (4, 6, 8, 10, 12)
"""Faces per die in the paper's grid."""

NUMBER_WORDS = {1: "one", 2: "two", 3: "three"}


def middle(n_dice: int, faces: int) -> int:
    """The middle value of the result's range ``n..n*faces``, rounded down (2d6: 7)."""
    return (n_dice + n_dice * faces) // 2


def observation_sets(
    n_dice: int, faces: int, min_results: int = 2
) -> Iterator[tuple[Observation, ...]]:
    """One or two observations about the result that leave ``min_results`` or more results.

    The candidates, in order (App. B, Table 2): even, odd, smaller than the middle
    value, greater than the middle value, not equal to 1, not equal to the middle
    value; first each alone, then each pair (in ``itertools.combinations`` order).
    ``min_results=1`` keeps every set some result satisfies (the paper's grid, whose
    examples include "smaller than 2" on a 4-sided die: only 1 is left).
    """
    m = middle(n_dice, faces)
    single = (
        Observation("even"), Observation("odd"), Observation("smaller", m),
        Observation("greater", m), Observation("not-equal", 1), Observation("not-equal", m),
    )
    prior = dice_sum(n_dice, faces)
    for combo in itertools.chain(((o,) for o in single), itertools.combinations(single, 2)):
        if sum(all(o.holds(v) for o in combo) for v in prior.values) >= min_results:
            yield combo


def _roll_words(n_dice: int) -> tuple[str, str]:
    """(what the result is called, how the dice are named) for ``n_dice`` dice."""
    return ("result", "the die") if n_dice == 1 else ("sum", "the dice")


def _setup(n_dice: int, faces: int) -> str:
    if n_dice == 1:
        return f"I roll a fair {faces}-sided die with faces numbered 1 to {faces}."
    return (
        f"I roll {NUMBER_WORDS[n_dice]} fair {faces}-sided dice with faces numbered 1 to "
        f"{faces} and add up the numbers they show."
    )


def paper_observation_text(combo: Sequence[Observation]) -> str:
    """The observations as App. C writes them: ``the result is smaller than 2 and that it is
    also an odd number`` (a parity statement comes second)."""

    def words(o: Observation) -> str:
        return f"an {o.kind} number" if o.kind in ("even", "odd") else o.text

    ordered = sorted(combo, key=lambda o: o.kind in ("even", "odd"))
    return " and that it is also ".join(words(o) for o in ordered)


def _paper_points(variant: DiceVariant, n_dice: int, faces: int, support: str,
                  min_results: int) -> Iterator[GridPoint]:
    """The grid points of one variant and die configuration in the paper's wording (App. C)."""
    prior = dice_sum(n_dice, faces)
    if n_dice == 1:
        setup = (f"A die has {faces} faces. The die is equally likely to land on any of its "
                 "faces. The die is cast.")
        roll, again = "The die lands on face number", "The die is cast again."
        question = "What is the probability that the die lands on face {outcome}"
    else:
        setup = (f"There are {n_dice} dice. Each die has {faces} faces and is equally likely to "
                 "land on any of its faces. The dice are cast.")
        roll, again = "The sum of the faces is equal to", "The dice are cast again."
        question = "What is the probability that the sum of the faces is equal to {outcome}"
    nan = math.nan
    if variant == "single":
        yield _point(variant, n_dice, faces, prior, setup, roll, f"{question}?", nan, "",
                     "paper")
        return
    if variant == "observation":
        for combo in observation_sets(n_dice, faces, min_results):
            said = paper_observation_text(combo)
            dist = condition(prior, combo)
            dist = dist.nonzero() if support == "posterior" else dist
            seen = f"We observe that the result is {said}."
            yield _point(
                variant, n_dice, faces, dist, f"{setup} {seen}",
                "Indeed, the result is equal to",
                "What is the probability that the result is equal to {outcome}?", nan,
                " and ".join(o.text for o in combo), "paper", (seen,),
            )
        return
    for r in prior.values:
        seen = f"{roll} {r}."
        first = f"{setup} {seen} {again}"
        if variant == "independent":
            yield _point(variant, n_dice, faces, prior, first, roll,
                         f"{question} the second time?", float(r), f"previous result {r}",
                         "paper", (seen,))
        else:
            yield _point(variant, n_dice, faces, shift(prior, r), first,
                         "The sum of both results is equal to",
                         "What is the probability that the sum of both results is equal to "
                         "{outcome}?", float(r), f"previous result {r}", "paper", (seen,))


def _point(
    variant: DiceVariant, n_dice: int, faces: int, dist: Exact, scenario: str, stem: str,
    question: str, previous: float, observation: str, style: Style = "belieflens",
    evidence: tuple[str, ...] = (),
) -> GridPoint:
    return GridPoint(
        scenario=scenario,
        stem=stem,
        question=question,
        labels=tuple(str(v) for v in dist.values),
        probs=dist.probs,
        observation=observation,
        style=style,
        evidence=evidence,
        truth={
            "scenario": "dice", "variant": variant, "dice": float(n_dice),
            "faces": float(faces), "previous": previous, "observation": observation,
        },
    )


def dice_points(variant: DiceVariant, n_dice: int, faces: int, support: str,
                style: Style = "belieflens", min_results: int = 2) -> Iterator[GridPoint]:
    """The grid points of one variant and die configuration, in grid order."""
    if style == "paper":
        yield from _paper_points(variant, n_dice, faces, support, min_results)
        return
    result, them = _roll_words(n_dice)
    setup = _setup(n_dice, faces)
    prior = dice_sum(n_dice, faces)
    nan = math.nan
    if variant == "single":
        yield _point(variant, n_dice, faces, prior, setup, f"The {result} is",
                     f"What is the probability that the {result} is {{outcome}}?", nan, "")
        return
    if variant == "observation":
        for combo in observation_sets(n_dice, faces, min_results):
            said = " and ".join(o.text for o in combo)
            dist = condition(prior, combo)
            dist = dist.nonzero() if support == "posterior" else dist
            seen = f"I tell you that the {result} is {said}."
            yield _point(
                variant, n_dice, faces, dist, f"{setup} {seen}", f"The {result} is",
                f"Given this, what is the probability that the {result} is {{outcome}}?",
                nan, said, evidence=(seen,),
            )
        return
    for r in prior.values:
        seen = f"The first time, the {result} was {r}."
        first = f"{setup} {seen}"
        if variant == "independent":
            yield _point(
                variant, n_dice, faces, prior,
                f"{first} I roll {them} again; the new roll does not depend on the first one.",
                f"This time, the {result} is",
                f"What is the probability that the {result} of the new roll is {{outcome}}?",
                float(r), f"previous {result} {r}", evidence=(seen,),
            )
        else:
            yield _point(
                variant, n_dice, faces, shift(prior, r),
                f"{first} I roll {them} again and add the new {result} to the first one.",
                "The total of both rolls is",
                "What is the probability that the total of both rolls is {outcome}?",
                float(r), f"previous {result} {r}", evidence=(seen,),
            )
