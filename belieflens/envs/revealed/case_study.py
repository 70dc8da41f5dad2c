"""Case study: a diagnosis whose prevalence is given per subgroup, with a subgroup share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from belieflens.envs.params import bad, param
from belieflens.envs.revealed.exact import Exact, categorical, mixture
from belieflens.envs.revealed.grid import GridEnvironment, GridPoint, RevealedParams

CaseVariant = Literal["marginal", "child", "adult"]
"""a random patient (the mixture's marginal), or a patient known to be a child / an adult."""

VARIANTS: tuple[CaseVariant, ...] = ("marginal", "child", "adult")
"""Variants in grid order."""

CONDITIONS = ("influenza", "common cold", "strep throat")
"""The diagnoses (outcomes), in outcome order."""

PREVALENCE: dict[str, tuple[int, ...]] = {"child": (50, 30, 20), "adult": (20, 60, 20)}
"""Prevalence (percent) of each condition within each subgroup."""

SHARES = (10, 30, 50, 70, 90)
"""Share (percent) of children among the patients, in grid order."""


@dataclass(frozen=True)
class CaseStudyParams(RevealedParams):
    """Parameters of the diagnosis case study."""

    share: int | None = param(None, "percent of children, one of 10, 30, 50, 70, 90; default: all")
    variant: Literal["all", "marginal", "child", "adult"] = param(
        "all", "which variant(s) of the grid"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.share is not None and self.share not in SHARES:
            raise bad("share", self.share, "10, 30, 50, 70, 90 or none")


def _rates(group: str) -> str:
    p = PREVALENCE[group]
    return f"{p[0]}% have {CONDITIONS[0]}, {p[1]}% a {CONDITIONS[1]} and {p[2]}% {CONDITIONS[2]}"


def diagnosis(variant: CaseVariant, share: int) -> Exact:
    """Exact distribution of the diagnosis: the marginal over subgroups, or one subgroup's."""
    if variant == "marginal":
        return mixture([share, 100 - share], [PREVALENCE["child"], PREVALENCE["adult"]])
    return categorical(PREVALENCE[variant])


def case_points(variant: CaseVariant, share: int) -> Iterator[GridPoint]:
    """The grid point of one variant and share."""
    setup = (
        f"At a clinic, {share}% of the patients are children and {100 - share}% are adults. "
        f"Among the children, {_rates('child')}. Among the adults, {_rates('adult')}."
    )
    who = {
        "marginal": "A patient is chosen at random.",
        "child": "A patient is chosen at random; the patient is a child.",
        "adult": "A patient is chosen at random; the patient is an adult.",
    }[variant]
    yield GridPoint(
        f"{setup} {who}", "The patient's diagnosis is",
        "What is the probability that the patient has {outcome}?",
        CONDITIONS, diagnosis(variant, share).probs,
        "" if variant == "marginal" else who.split("; ")[1].rstrip("."),
        {"scenario": "case-study", "variant": variant, "share": float(share)},
    )


class CaseStudy(GridEnvironment[CaseStudyParams]):
    """Case study: a random clinic patient's diagnosis from subgroup prevalences.

    The share of children is 10-90%; the conditions' prevalence is given among
    children and among adults. Variants: a random patient (oracle: the exact
    marginal of the mixture), or one known to be a child or an adult (oracle: that
    subgroup's prevalence; the share is then irrelevant). Grid order: variant, share.
    """

    name = "case-study"
    Params = CaseStudyParams

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point the parameters select, in grid order."""
        p = self.params
        variants = VARIANTS if p.variant == "all" else (p.variant,)
        shares = SHARES if p.share is None else (p.share,)
        return [point for v in variants for s in shares for point in case_points(v, s)]
