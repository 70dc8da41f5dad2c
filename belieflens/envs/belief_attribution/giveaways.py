"""Form-only pickers: how often the answer can be found without knowing the fact.

A question set gives its answers away when the *form* of the three options points at the
answer: the correct number is always the middle one, the correct element the only name that
contains a letter of its symbol, the correct capital the shortest option, the answer always
shown first. Each picker below sees only the question's text and the options in the order
they are shown, never which one is right; a set is free of that giveaway when every picker is
at chance (1/3 with three options). Where a picker cannot choose (no numeric options, no
letter matches, a tie) it guesses uniformly among its candidates, and scores the expected
share of a uniform guess, so a picker that knows nothing scores exactly chance.

The pickers, by what they read:

- numbers: ``middle-value``, ``largest``, ``smallest`` (when every option is a number:
  ``+33`` reads as 33);
- length: ``longest``, ``shortest`` (characters), ``most-words``, ``fewest-words``;
- letters: ``first-alphabetically``, ``last-alphabetically``;
- initials: ``initial-letter`` (the options starting with the first letter of a capitalised
  word of the question after its first word: the symbol ``He``, the country ``Kenya``),
  ``shared-initial`` (the options whose initial another option shares) and
  ``unique-initial`` (the options whose initial no other shares);
- the question's subject (its last capitalised word after the first word: ``Hf``,
  ``Kenya``): ``subject-letters`` (the options holding every letter of it),
  ``second-letter`` (the options holding its second letter), ``subject-prefix`` (the options
  starting with its first two letters) and ``subject-overlap`` (the options sharing the most
  letter pairs with it);
- the options among themselves: ``most-alike`` (the option most like the other two, by
  shared letter pairs) and ``least-alike`` (the one least like them);
- ``position``: the position at which the answer is shown most often over the whole set (the
  one picker that looks at the set, not the item).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

Picker = Literal[
    "middle-value", "largest", "smallest", "longest", "shortest", "most-words", "fewest-words",
    "first-alphabetically", "last-alphabetically", "initial-letter", "shared-initial",
    "unique-initial", "subject-letters", "second-letter", "subject-prefix", "subject-overlap",
    "most-alike", "least-alike", "position"]
"""The form-only pickers."""

PICKERS: Final[tuple[Picker, ...]] = (
    "middle-value", "largest", "smallest", "longest", "shortest", "most-words", "fewest-words",
    "first-alphabetically", "last-alphabetically", "initial-letter", "shared-initial",
    "unique-initial", "subject-letters", "second-letter", "subject-prefix", "subject-overlap",
    "most-alike", "least-alike", "position")

CHANCE_MARGIN: Final = 0.07
"""How far from chance (1/3) a picker may score on a shipped set: about a binomial 95%
interval's half-width at the sets' sizes."""


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


@functools.lru_cache(maxsize=1 << 16)
def plain(text: str) -> str:
    """Lower case, accents removed (cached: the pickers ask for the same options' forms
    once per candidate pair and picker)."""
    decomposed = unicodedata.normalize("NFKD", text.strip())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _initial(text: str) -> str:
    return plain(text)[:1]


def _all(item: Shown) -> tuple[int, ...]:
    return tuple(range(len(item.options)))


def _best(item: Shown, value: Callable[[str], float], *, most: bool = True) -> tuple[int, ...]:
    """The options of the largest (``most``) or smallest ``value``."""
    vals = [value(o) for o in item.options]
    target = max(vals) if most else min(vals)
    return tuple(j for j, v in enumerate(vals) if v == target)


def _numbers(item: Shown) -> list[float] | None:
    nums = [_number(o) for o in item.options]
    if any(n is None for n in nums) or len(set(nums)) != len(nums):
        return None
    return [float(n) for n in nums if n is not None]


def middle_value(item: Shown) -> tuple[int, ...]:
    """The median option when every option is a distinct number, else every option."""
    nums = _numbers(item)
    if nums is None:
        return _all(item)
    order = sorted(range(len(nums)), key=lambda j: nums[j])
    return (order[len(order) // 2],)


def _extreme(item: Shown, *, most: bool) -> tuple[int, ...]:
    nums = _numbers(item)
    if nums is None:
        return _all(item)
    return (nums.index(max(nums) if most else min(nums)),)


def _words(text: str) -> float:
    return float(len(text.split()))


def initial_letter(item: Shown) -> tuple[int, ...]:
    """The options starting with the first letter of a capitalised word of the question
    (after its first word), else every option."""
    words = re.findall(r"[^\W\d_][\w'-]*", item.question)[1:]
    letters = {_initial(w) for w in words if w[:1].isupper()}
    hit = tuple(j for j, o in enumerate(item.options) if _initial(o) in letters)
    return hit or _all(item)


def _by_initial(item: Shown, *, shared: bool) -> tuple[int, ...]:
    counts = Counter(_initial(o) for o in item.options)
    hit = tuple(j for j, o in enumerate(item.options) if (counts[_initial(o)] > 1) == shared)
    return hit or _all(item)


def subject(question: str) -> str:
    """The question's subject: its last capitalised word after the first word (``Hf`` in
    "Which chemical element has the symbol Hf?"), ``""`` when it has none."""
    words = [w for w in re.findall(r"[^\W\d_][\w'-]*", question)[1:] if w[:1].isupper()]
    return plain(words[-1]) if words else ""


def _holding(item: Shown, letters: str) -> tuple[int, ...]:
    if not letters:
        return _all(item)
    hit = tuple(j for j, o in enumerate(item.options) if all(c in plain(o) for c in letters))
    return hit or _all(item)


@functools.lru_cache(maxsize=1 << 16)
def _pairs(text: str) -> frozenset[str]:
    t = re.sub(r"[^a-z0-9]", "", plain(text))
    return frozenset({t[i:i + 2] for i in range(len(t) - 1)} or {t})


def _similarity(a: str, b: str) -> float:
    pa, pb = _pairs(a), _pairs(b)
    return len(pa & pb) / max(len(pa | pb), 1)


def subject_prefix(item: Shown) -> tuple[int, ...]:
    """The options starting with the subject's first two letters (else every option)."""
    head = subject(item.question)[:2]
    hit = tuple(j for j, o in enumerate(item.options) if len(head) == 2
                and plain(o).startswith(head))
    return hit or _all(item)


def subject_overlap(item: Shown) -> tuple[int, ...]:
    """The options sharing the most letter pairs with the subject (every option on a tie or
    without a subject)."""
    s = subject(item.question)
    if not s:
        return _all(item)
    return _best(item, lambda o: float(len(_pairs(o) & _pairs(s))))


def _alike(item: Shown, *, most: bool) -> tuple[int, ...]:
    opts = item.options
    return _best(item, lambda o: sum(_similarity(o, p) for p in opts if p is not o), most=most)


ITEM_PICKERS: Final[dict[Picker, Callable[[Shown], tuple[int, ...]]]] = {
    "middle-value": middle_value,
    "largest": lambda it: _extreme(it, most=True),
    "smallest": lambda it: _extreme(it, most=False),
    "longest": lambda it: _best(it, lambda o: float(len(o))),
    "shortest": lambda it: _best(it, lambda o: float(len(o)), most=False),
    "most-words": lambda it: _best(it, _words),
    "fewest-words": lambda it: _best(it, _words, most=False),
    "first-alphabetically": lambda it: (min(_all(it), key=lambda j: plain(it.options[j])),),
    "last-alphabetically": lambda it: (max(_all(it), key=lambda j: plain(it.options[j])),),
    "initial-letter": initial_letter,
    "shared-initial": lambda it: _by_initial(it, shared=True),
    "unique-initial": lambda it: _by_initial(it, shared=False),
    "subject-letters": lambda it: _holding(it, subject(it.question)),
    "second-letter": lambda it: _holding(it, subject(it.question)[1:2]),
    "subject-prefix": subject_prefix,
    "subject-overlap": subject_overlap,
    "most-alike": lambda it: _alike(it, most=True),
    "least-alike": lambda it: _alike(it, most=False),
}
"""Each item picker: the positions it picks among (several: a uniform guess among them)."""


def longest(item: Shown) -> tuple[int, ...]:
    """The options of most characters."""
    return ITEM_PICKERS["longest"](item)


def item_score(item: Shown, picker: Picker) -> float:
    """The expected score of ``picker`` on one item (``position`` cannot score one item)."""
    picks = ITEM_PICKERS[picker](item)
    return 1.0 / len(picks) if item.correct in picks else 0.0


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


BALANCE_WIDTH: Final = 8
"""Candidates per item whose pairs :func:`balanced_distractors` weighs (the most plausible)."""

RANK_COST: Final = 0.3
"""What one step down the candidates' order of plausibility costs a pair, against the squared
distance of the pickers' running scores from chance."""


def candidate_pairs(candidates: Sequence[str], ok: Callable[[str, str], bool],
                    width: int = BALANCE_WIDTH) -> list[tuple[str, str]]:
    """Pairs of the first ``width`` ``candidates`` that ``ok`` accepts, the most plausible
    first (by the sum of their places in ``candidates``)."""
    top = list(candidates)[:width]
    pairs = [(i, j) for i in range(len(top)) for j in range(i + 1, len(top))
             if ok(top[i], top[j])]
    return [(top[i], top[j]) for i, j in sorted(pairs, key=lambda p: (p[0] + p[1], p[0]))]


def balanced_distractors(
    items: Sequence[tuple[str, str, Sequence[tuple[str, str]]]], *,
    rank_cost: float = RANK_COST,
) -> list[tuple[str, str] | None]:
    """For each ``(question, answer, pairs)`` in order, the pair of distractors (from
    ``pairs``, the most plausible first) that keeps every item picker's running score closest
    to chance: the pair minimising the squared distance of the pickers' summed scores from a
    third of the items so far, plus ``rank_cost`` per place down ``pairs``. ``None`` where
    an item has no pair. Deterministic; the pickers are order-free, so the order the options
    are shown in does not matter."""
    names = [p for p in PICKERS if p in ITEM_PICKERS]
    sums: dict[Picker, float] = {p: 0.0 for p in names}
    done = 0
    out: list[tuple[str, str] | None] = []
    for question, answer, pairs in items:
        if not pairs:
            out.append(None)
            continue
        target = (done + 1) / 3.0
        best: tuple[float, int] | None = None
        scores: list[dict[Picker, float]] = []
        for k, (a, b) in enumerate(pairs):
            shown = Shown(question, (answer, a, b), 0)
            got = {p: item_score(shown, p) for p in names}
            scores.append(got)
            cost = sum((sums[p] + got[p] - target) ** 2 for p in names) + rank_cost * k
            if best is None or cost < best[0]:
                best = (cost, k)
        assert best is not None
        k = best[1]
        for p in names:
            sums[p] += scores[k][p]
        done += 1
        out.append(pairs[k])
    return out
