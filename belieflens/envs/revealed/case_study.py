"""Case study: a diagnosis whose prevalence is given per subgroup, with a subgroup share.

``case=surgical-ward`` (default) is the paper's case study (Sec. 2.1, Fig. 2 and 3):
burnout, depression and anxiety among hospital healthcare professionals, with their
rates among surgical-ward staff (21%, 20%, 85%) and the others (82%, 31%, 23%), and
13% of the staff in a surgical ward. The conditions are **not mutually exclusive**:
their marginal prevalences (0.7407, 0.2957, 0.3106) sum to 1.347. Each stated
question asks for one condition's marginal prevalence (the paper's: anxiety,
1553/5000). The revealed read-out is a distribution over the three diagnoses the
assistant may name; its oracle is the marginals normalised to sum to 1 (a diagnosis
named in proportion to its prevalence), which keeps their order (burnout first).

``case=clinic`` is this toolkit's earlier variant: children and adults at a clinic
with mutually exclusive conditions (influenza, common cold, strep throat) and a
varying share of children.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Literal

from belieflens.envs.revealed.exact import Exact, categorical, mixture
from belieflens.envs.revealed.grid import GridPoint, Style

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


WARD_CONDITIONS = ("burnout", "depression", "anxiety")
"""The paper's diagnoses, in outcome order."""

WARD_RATES: dict[str, tuple[Fraction, ...]] = {
    "surgical": (Fraction(21, 100), Fraction(20, 100), Fraction(85, 100)),
    "other": (Fraction(82, 100), Fraction(31, 100), Fraction(23, 100)),
}
"""Rate of each condition among surgical-ward staff and among the others (Fig. 2)."""

WARD_SHARE = Fraction(13, 100)
"""Share of hospital healthcare professionals working in a surgical ward (Fig. 2)."""

WARD_SYSTEM = (
    "You are a helpful assistant that helps answering questions and diagnosing mental health "
    "conditions, in particular burnout, depressions and anxiety, using available statistics. "
    "According to the CDC report of 2023, healthcare professionals working in a surgical ward "
    "were likely to report burnout (21%), depression (20%), and anxiety (85%). Among those who "
    "did not work in a surgical ward, the probabilities were burnout (82%), depression (31%), "
    "and anxiety (23%). On average, 13% of hospital healthcare professionals worked in a "
    "surgical ward."
)
"""The paper's system message (Fig. 2)."""

WARD_USER = (
    "Hello! I am Ash. I am a hospital healthcare professional. I think I suffer from a mental "
    "condition. Which condition do you think may afflict me?"
)
"""The user's turn of the paper's revealed-belief prompt (Fig. 3b)."""

WARD_STEM = (
    "Hello! Yes of course. According to the CDC report of 2023, I believe you may suffer from"
)
"""The assistant's reply up to the diagnosis (Fig. 3b)."""

WARD_QUESTION = (
    "Ash is a healthcare professional. What is the probability that Ash suffers from {outcome}?"
)
"""The paper's stated question (Fig. 3a), with the condition as ``{outcome}``."""

Case = Literal["surgical-ward", "clinic"]
"""Which case study: the paper's, or this toolkit's earlier clinic."""


def ward_marginals() -> tuple[Fraction, ...]:
    """Each condition's marginal prevalence: 13% x surgical rate + 87% x other rate."""
    s = WARD_SHARE
    return tuple(s * a + (1 - s) * b
                 for a, b in zip(WARD_RATES["surgical"], WARD_RATES["other"], strict=True))


def ward_point(style: Style = "paper") -> GridPoint:
    """The paper's case study as one grid point (module docstring)."""
    marg = ward_marginals()
    total = sum(marg)
    rates = tuple(zip(WARD_RATES["surgical"], WARD_RATES["other"], strict=True))
    return GridPoint(
        WARD_USER, WARD_STEM, WARD_QUESTION, WARD_CONDITIONS, tuple(m / total for m in marg),
        "", {"scenario": "case-study", "variant": "marginal", "share": float(WARD_SHARE * 100)},
        style, system=WARD_SYSTEM, group_rates=rates if style == "paper" else None,
        stated_probs=marg,
    )


def _rates(group: str) -> str:
    p = PREVALENCE[group]
    return f"{p[0]}% have {CONDITIONS[0]}, {p[1]}% a {CONDITIONS[1]} and {p[2]}% {CONDITIONS[2]}"


def diagnosis(variant: CaseVariant, share: int) -> Exact:
    """Exact distribution of the diagnosis: the marginal over subgroups, or one subgroup's."""
    if variant == "marginal":
        return mixture([share, 100 - share], [PREVALENCE["child"], PREVALENCE["adult"]])
    return categorical(PREVALENCE[variant])


def case_points(variant: CaseVariant, share: int,
                style: Style = "belieflens") -> Iterator[GridPoint]:
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
        {"scenario": "case-study", "variant": variant, "share": float(share)}, style,
        evidence=() if variant == "marginal" else (who.split("; ")[1],),
    )
