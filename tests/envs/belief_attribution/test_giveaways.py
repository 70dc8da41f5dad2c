"""The shipped question sets do not give their answers away by form: pickers that see only the
question and the options as the environment shows them are at chance (≤ 40% with three
options), over each whole set and, for the default set, within each domain."""

from __future__ import annotations

from collections import defaultdict

import pytest

import belieflens.envs as envs
from belieflens.envs.belief_attribution.env import BeliefAttribution
from belieflens.envs.belief_attribution.giveaways import (
    PICKERS,
    Picker,
    Shown,
    answer_ranks,
    initial_letter,
    longest,
    middle_value,
    score,
)

CHANCE_BOUND = 0.40
"""A picker at chance scores 1/3 with three options; the bound leaves room for sampling."""


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
    item = Shown("Which chemical element has the symbol Fe?", ("Iron", "Fluorine", "Lead"), 0)
    assert initial_letter(item) == (1,)
    assert middle_value(Shown("q?", ("+34", "+33", "+351"), 0)) == (0,)
    assert middle_value(item) == (0, 1, 2)  # not numeric: a uniform guess
    assert longest(item) == (1,)
    giveaway = [Shown("q?", (str(z - 1), str(z), str(z + 1)), 1) for z in range(2, 50)]
    assert score(giveaway, "middle-value").accuracy == 1.0
    assert score(giveaway, "position").accuracy == 1.0
    assert score(giveaway, "longest").accuracy < 0.5
    assert answer_ranks(giveaway) == {1: 48}


@pytest.mark.parametrize("questions", ["facts", "computed", "shipped"])
def test_form_only_pickers_are_at_chance_on_each_whole_set(questions: str) -> None:
    """The default set once had the answer in the middle of its atomic numbers in 116 of 118
    items, and as the only name starting like its symbol in 102 of 118 element names."""
    items = [s for ss in shown(questions).values() for s in ss]
    for picker in PICKERS:
        result = score(items, picker)
        assert result.accuracy <= CHANCE_BOUND, (questions, result)
    ranks = answer_ranks(items)
    assert max(ranks.values()) <= CHANCE_BOUND * sum(ranks.values()), ranks


def test_form_only_pickers_are_at_chance_in_every_domain_of_the_default_set() -> None:
    """Item by item (the position picker looks at a whole set, so it is tested above)."""
    for domain, items in shown("facts").items():
        pickers: tuple[Picker, ...] = ("middle-value", "initial-letter", "longest")
        for picker in pickers:
            result = score(items, picker)
            assert result.accuracy <= CHANCE_BOUND, (domain, result)
        ranks = answer_ranks(items)
        if ranks:
            assert max(ranks.values()) <= CHANCE_BOUND * sum(ranks.values()), (domain, ranks)
