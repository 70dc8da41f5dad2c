"""Coins: how many of 2-4 (possibly biased) coins land on the focus face."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from belieflens.envs.revealed.exact import Exact, focus_count, shift
from belieflens.envs.revealed.grid import GridPoint, Style

CoinsVariant = Literal["regular", "independent", "dependent"]
"""one toss; a previous toss then a new independent one; the total over both tosses."""

VARIANTS: tuple[CoinsVariant, ...] = ("regular", "independent", "dependent")
"""Variants in grid order."""

Face = Literal["Heads", "Tails"]
"""A coin face."""

COINS = (2, 3, 4)
"""Numbers of coins in the paper's grid."""

FACES: tuple[Face, ...] = ("Heads", "Tails")
"""Focus faces in grid order."""

BIASES = (1, 3, 5)
"""Each coin is ``bias`` times more likely to land on the focus face than on the other."""

NUMBER_WORDS = {2: "two", 3: "three", 4: "four"}


def _setup(n: int, focus: Face, bias: int) -> str:
    other = "Tails" if focus == "Heads" else "Heads"
    kind = (
        " The coins are fair." if bias == 1
        else f" Each coin is {bias} times more likely to land on {focus} than on {other}."
    )
    return f"I toss {NUMBER_WORDS[n]} coins.{kind} I count how many coins land on {focus}."


def paper_setup(n: int, focus: Face, bias: int) -> str:
    """The coins and their bias as App. C writes them."""
    other = "Tails" if focus == "Heads" else "Heads"
    kind = (
        "Each coin is fair and is equally likely to land on Heads and Tails." if bias == 1
        else f"Each coin is biased and is {bias} times more likely to land on {focus} than on "
        f"{other}."
    )
    return f"There are {n} coins. {kind}"


def coins_points(variant: CoinsVariant, n: int, focus: Face, bias: int,
                 style: Style = "belieflens") -> Iterator[GridPoint]:
    """The grid points of one variant and coin configuration, in grid order."""
    paper = style == "paper"
    setup = paper_setup(n, focus, bias) if paper else _setup(n, focus, bias)
    prior = focus_count(n, bias)
    count = f"the number of coins showing {focus}"

    def point(dist: Exact, scenario: str, stem: str, question: str, previous: float,
              seen: str = "") -> GridPoint:
        return GridPoint(
            scenario=scenario, stem=stem, question=question, evidence=(seen,) if seen else (),
            labels=tuple(str(v) for v in dist.values), probs=dist.probs,
            observation="" if previous != previous else f"previous count {int(previous)}",
            style=style,
            truth={"scenario": "coins", "variant": variant, "coins": float(n), "focus": focus,
                   "bias": float(bias), "previous": previous},
        )

    if paper:
        number = f"resulting number of {focus}"
        if variant == "regular":
            yield point(prior, setup, f"The coins are flipped and the {number} is equal to",
                        f"What is the probability that the {number} is equal to {{outcome}} "
                        "after flipping the coins?", float("nan"))
            return
        for r in prior.values:
            seen = f"The coins are flipped a first time and the {number} is {r}."
            first = f"{setup} {seen}"
            if variant == "independent":
                yield point(prior, first,
                            f"The coins are flipped again and the new {number} is equal to",
                            f"What is the probability that the new {number} is equal to "
                            "{outcome} after flipping the coins again?", float(r), seen)
            else:
                both = f"sum of both resulting numbers of {focus}"
                yield point(shift(prior, r), first,
                            f"The coins are flipped again and the {both} is equal to",
                            f"What is the probability that the {both} is equal to {{outcome}}?",
                            float(r), seen)
        return
    if variant == "regular":
        yield point(prior, setup, f"The number of coins showing {focus} is",
                    f"What is the probability that {count} is {{outcome}}?", float("nan"))
        return
    for r in prior.values:
        seen = f"The first time, {r} {'coin' if r == 1 else 'coins'} landed on {focus}."
        first = f"{setup} {seen}"
        if variant == "independent":
            yield point(prior, f"{first} I toss all {n} coins again; the new toss does not "
                        "depend on the first one.", "This time, the number of coins showing "
                        f"{focus} is", f"What is the probability that {count} in the new toss "
                        "is {outcome}?", float(r), seen)
        else:
            yield point(shift(prior, r), f"{first} I toss all {n} coins again and add the new "
                        "count to the first one.", f"The total number of {focus} over both "
                        "tosses is", f"What is the probability that the total number of {focus} "
                        "over both tosses is {outcome}?", float(r), seen)
