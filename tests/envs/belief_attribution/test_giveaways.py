"""The shipped question sets do not give their answers away by form: pickers that see only the
question and the options as the environment shows them are at chance (1/3 ± 0.07 with three
options), over each whole set and, for the default set, within each domain; so are pickers
the balance of distractors never weighs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import pytest

import belieflens.envs as envs
from belieflens.envs.belief_attribution.env import BeliefAttribution
from belieflens.envs.belief_attribution.giveaways import (
    CHANCE_MARGIN,
    ITEM_PICKERS,
    PICKERS,
    Shown,
    answer_ranks,
    balanced_distractors,
    initial_letter,
    longest,
    middle_value,
    plain,
    score,
    subject,
)


def shown(questions: str) -> dict[str, list[Shown]]:
    """Every item of a set as the environment shows it (rotation 0 of its MCQ, the order the
    seeded permutation gives), by domain."""
    env = envs.get("belief-attribution", protocol="belieflens", condition="self",
                   questions=questions)
    assert isinstance(env, BeliefAttribution)
    items = {i.id: i for i in env.items}
    out: dict[str, list[Shown]] = defaultdict(list)
    for ep in env.episodes(len(items), seed=0):
        probe = ep.turns[0].probes[0]
        q = probe.queries[0]
        item = items[str(ep.truth["item"])]
        s = Shown(item.question, tuple(probe.labels[o] for o in q.outcome),
                  list(q.outcome).index(int(ep.truth["correct"])))
        out[item.domain].append(s)
    assert sum(map(len, out.values())) == len(items)  # every item once
    return out


def test_the_pickers_read_form_only() -> None:
    item = Shown("Which chemical element has the symbol Hf?", ("Hafnium", "Holmium", "Hassium"),
                 0)
    assert initial_letter(item) == (0, 1, 2)  # all start like the symbol: a uniform guess
    assert ITEM_PICKERS["second-letter"](item) == (0,)  # only Hafnium has an f
    assert subject("Which chemical element has the symbol Hf?") == "hf"
    assert middle_value(Shown("q?", ("+34", "+33", "+351"), 0)) == (0,)
    assert middle_value(item) == (0, 1, 2)  # not numeric: a uniform guess
    iron = Shown("Which chemical element has the symbol Fe?", ("Iron", "Fluorine", "Lead"), 0)
    assert longest(iron) == (1,) and ITEM_PICKERS["shortest"](iron) == (0, 2)
    assert ITEM_PICKERS["unique-initial"](Shown("q?", ("Bern", "Basel", "Geneva"), 0)) == (2,)
    giveaway = [Shown("q?", (str(z - 1), str(z), str(z + 1)), 1) for z in range(2, 50)]
    assert score(giveaway, "middle-value").accuracy == 1.0
    assert score(giveaway, "position").accuracy == 1.0
    assert score(giveaway, "longest").accuracy < 0.5
    assert answer_ranks(giveaway) == {1: 48}


def test_the_balance_chooses_distractors_that_keep_every_picker_at_chance() -> None:
    """The most plausible pair always makes the answer the shortest option; weighing every
    plausible pair, the balance brings the shortest-option picker back to chance."""
    items = [(f"What is the capital of Land{i}?", "Abcdef",
              [("Abcdefgh", "Abcdefghij"), ("Abc", "Abcdefghi"), ("Abcd", "Ab")])
             for i in range(60)]
    naive = [Shown(q, (a, *pairs[0]), 0) for q, a, pairs in items]
    assert score(naive, "shortest").accuracy == 1.0
    chosen = balanced_distractors(items)
    shown_items = [Shown(q, (a, *ds), 0) for (q, a, _), ds in zip(items, chosen, strict=True)
                   if ds is not None]
    assert len(shown_items) == 60
    for picker in ("shortest", "longest", "middle-value"):
        assert abs(score(shown_items, picker).accuracy - 1 / 3) <= CHANCE_MARGIN, picker


def _vowels(o: str) -> float:
    return sum(c in "aeiou" for c in plain(o)) / max(len(plain(o)), 1)


def _median(it: Shown, value: Callable[[str], object]) -> tuple[int, ...]:
    vals = [value(o) for o in it.options]
    if len(set(map(repr, vals))) < len(vals):
        return (0, 1, 2)
    order = sorted(range(len(vals)), key=lambda j: repr(vals[j]) if isinstance(
        vals[j], str) else float(str(vals[j])))
    return (order[1],)


def _matching(it: Shown, test: Callable[[str, Sequence[str]], bool]) -> tuple[int, ...]:
    return tuple(j for j, o in enumerate(it.options) if test(o, it.options)) or (0, 1, 2)


UNSEEN: dict[str, Callable[[Shown], tuple[int, ...]]] = {
    "middle-length": lambda it: _median(it, len),
    "middle-alphabetically": lambda it: _median(it, plain),
    "most-vowels": lambda it: tuple(
        j for j, o in enumerate(it.options) if _vowels(o) == max(map(_vowels, it.options))),
    "shared-last-letter": lambda it: _matching(
        it, lambda o, opts: sum(plain(p)[-1:] == plain(o)[-1:] for p in opts) > 1),
    "ends-in-a": lambda it: _matching(it, lambda o, _: plain(o).endswith("a")),
    "double-letter": lambda it: _matching(
        it, lambda o, _: any(a == b for a, b in zip(plain(o), plain(o)[1:], strict=False))),
    "odd-number": lambda it: _matching(
        it, lambda o, _: o.lstrip("+").isdigit() and int(o.lstrip("+")) % 2 == 1),
}
"""Form-only pickers the balance of distractors never weighs: a check that it did not only
trade one giveaway for another."""


def _unseen_score(items: Sequence[Shown], picker: Callable[[Shown], tuple[int, ...]]) -> float:
    picks = [picker(it) for it in items]
    return sum(1 / len(p) for it, p in zip(items, picks, strict=True) if it.correct in p) / len(
        items)


@pytest.mark.parametrize("questions", ["facts", "computed", "shipped"])
def test_every_form_only_picker_is_at_chance_on_every_shipped_set(questions: str) -> None:
    """Each picker of the module within chance ± 0.07 over the whole set; the default set
    once gave its element names away to the one holding its symbol's second letter (0.64)."""
    items = [s for ss in shown(questions).values() for s in ss]
    for picker in PICKERS:
        result = score(items, picker)
        assert abs(result.accuracy - 1 / 3) <= CHANCE_MARGIN, (questions, result)
    for name, fn in UNSEEN.items():
        assert abs(_unseen_score(items, fn) - 1 / 3) <= CHANCE_MARGIN, (questions, name)
    ranks = answer_ranks(items)
    assert max(ranks.values()) <= (1 / 3 + CHANCE_MARGIN) * sum(ranks.values()), ranks


def test_every_form_only_picker_is_at_chance_in_every_domain_of_the_default_set() -> None:
    """Item by item (the position picker looks at a whole set, so it is tested above); the
    state capitals once gave their answer away as the shortest option (0.46 of 48)."""
    for domain, items in shown("facts").items():
        assert len(items) >= 40
        for picker in ITEM_PICKERS:
            result = score(items, picker)
            assert abs(result.accuracy - 1 / 3) <= CHANCE_MARGIN, (domain, result)
        for name, fn in UNSEEN.items():
            assert abs(_unseen_score(items, fn) - 1 / 3) <= CHANCE_MARGIN, (domain, name)
