"""Form-only pickers: how often the answer can be found without knowing the fact.

A question set gives its answers away when the *form* of the three options points at the
answer: the correct number is always the middle one, the correct element the only name that
starts like its symbol, the correct answer the longest option or always shown first. Each
picker below sees only the question's text and the options in the order they are shown, never
which one is right; a set is free of that giveaway when every picker is at chance (1/3 with
three options). Where a picker cannot choose (no numeric options, no initial matches, a tie)
it guesses uniformly among its candidates, and scores the expected share of a uniform guess,
so a picker that knows nothing scores exactly chance.

- ``middle-value``: the median of three numeric options (``+33`` reads as 33);
- ``initial-letter``: the options that start with the first letter of a capitalised word of
  the question after its first word (the symbol ``He``, the country ``Kenya``);
- ``longest``: the option of most characters;
- ``position``: the position at which the answer is shown most often over the whole set (the
  one picker that looks at the set, not the item).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

Picker = Literal["middle-value", "initial-letter", "longest", "position"]
"""The form-only pickers."""

PICKERS: Final[tuple[Picker, ...]] = ("middle-value", "initial-letter", "longest", "position")


@dataclass(frozen=True)
class Shown:
    """One question as a reader sees it: its text, its options in the order shown, and (for
    scoring only) the position of the correct one."""

    question: str
    options: tuple[str, ...]
    correct: int


def _number(text: str) -> float | None:
    try:
        return float(text.strip().lstrip("+").replace(",", ""))
    except ValueError:
        return None


def _initial(text: str) -> str:
    plain = "".join(c for c in unicodedata.normalize("NFKD", text.strip())
                    if not unicodedata.combining(c))
    return plain[:1].casefold()


def middle_value(item: Shown) -> tuple[int, ...]:
    """The median option when every option is a number, else every option."""
    nums = [_number(o) for o in item.options]
    if any(n is None for n in nums) or len(set(nums)) != len(nums):
        return tuple(range(len(item.options)))
    order = sorted(range(len(nums)), key=lambda j: nums[j] or 0.0)
    return (order[len(order) // 2],)


def initial_letter(item: Shown) -> tuple[int, ...]:
    """The options starting with the first letter of a capitalised word of the question
    (after its first word), else every option."""
    words = re.findall(r"[^\W\d_][\w'-]*", item.question)[1:]
    letters = {_initial(w) for w in words if w[:1].isupper()}
    hit = tuple(j for j, o in enumerate(item.options) if _initial(o) in letters)
    return hit or tuple(range(len(item.options)))


def longest(item: Shown) -> tuple[int, ...]:
    """The options of most characters."""
    n = max(len(o) for o in item.options)
    return tuple(j for j, o in enumerate(item.options) if len(o) == n)


ITEM_PICKERS: Final[dict[Picker, Callable[[Shown], tuple[int, ...]]]] = {
    "middle-value": middle_value, "initial-letter": initial_letter, "longest": longest,
}


@dataclass(frozen=True)
class PickerScore:
    """A picker's expected accuracy over a set.

    Attributes:
        picker: which picker.
        accuracy: expected share of items it answers right (a uniform guess among its
            candidates scoring ``1 / candidates`` when the answer is one of them).
        decided: items where it picked one option (not a guess among several).
        n: items scored.
    """

    picker: Picker
    accuracy: float
    decided: int
    n: int


def score(items: Sequence[Shown], picker: Picker) -> PickerScore:
    """The expected accuracy of ``picker`` over ``items``."""
    if not items:
        return PickerScore(picker, float("nan"), 0, 0)
    picks: list[tuple[int, ...]]
    if picker == "position":
        best = Counter(it.correct for it in items).most_common(1)[0][0]
        picks = [(best,) for _ in items]
    else:
        picks = [ITEM_PICKERS[picker](it) for it in items]
    total = sum((1.0 / len(p)) if it.correct in p else 0.0
                for it, p in zip(items, picks, strict=True))
    return PickerScore(picker, total / len(items), sum(len(p) == 1 for p in picks), len(items))


def answer_ranks(items: Sequence[Shown]) -> Counter[int]:
    """How often the answer is the smallest (0), middle (1) or largest (2) of three numeric
    options (items with a non-numeric option are left out)."""
    out: Counter[int] = Counter()
    for it in items:
        nums = [_number(o) for o in it.options]
        if all(n is not None for n in nums) and len(set(nums)) == len(nums):
            out[sorted(nums, key=lambda n: n or 0.0).index(nums[it.correct])] += 1
    return out
