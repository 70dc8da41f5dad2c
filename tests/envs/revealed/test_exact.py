"""Exact distributions against brute-force enumeration written independently here."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable
from fractions import Fraction
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from belieflens.envs.revealed.exact import (
    Exact,
    Observation,
    categorical,
    condition,
    dice_sum,
    focus_count,
    mixture,
    shift,
)


def brute_dice(
    n: int, faces: int, keep: Callable[[int], bool] = lambda s: True
) -> dict[int, Fraction]:
    sums = [sum(r) for r in itertools.product(range(1, faces + 1), repeat=n)]
    kept = Counter(s for s in sums if keep(s))
    total = sum(kept.values())
    return {s: Fraction(c, total) for s, c in kept.items()}


def as_dict(d: Exact) -> dict[int, Fraction]:
    return {v: p for v, p in zip(d.values, d.probs, strict=True) if p}


def test_2d6_even_and_greater_than_3() -> None:
    d = condition(dice_sum(2, 6), [Observation("even"), Observation("greater", 3)])
    expected = brute_dice(2, 6, lambda s: s % 2 == 0 and s > 3)
    assert as_dict(d) == expected
    # by hand: sums 4, 6, 8, 10, 12 have 3, 5, 5, 3, 1 ways out of 17
    assert expected == {4: Fraction(3, 17), 6: Fraction(5, 17), 8: Fraction(5, 17),
                        10: Fraction(3, 17), 12: Fraction(1, 17)}
    assert d.values == tuple(range(2, 13))  # the prior support is kept, ruled-out values at 0
    assert d.nonzero().values == (4, 6, 8, 10, 12)


def test_three_coins_biased_3_to_1_total_with_previous_2() -> None:
    d = shift(focus_count(3, 3), 2)
    weights: defaultdict[int, Fraction] = defaultdict(Fraction)
    for seq in itertools.product("HT", repeat=3):  # P(H) = 3/4, P(T) = 1/4
        p = Fraction(1)
        for face in seq:
            p *= Fraction(3, 4) if face == "H" else Fraction(1, 4)
        weights[2 + seq.count("H")] += p
    assert as_dict(d) == dict(weights)
    assert d.probs == (Fraction(1, 64), Fraction(9, 64), Fraction(27, 64), Fraction(27, 64))
    assert d.values == (2, 3, 4, 5)


@given(st.integers(1, 3), st.sampled_from([4, 6, 8, 10, 12]))
def test_dice_sum_matches_enumeration(n: int, faces: int) -> None:
    d = dice_sum(n, faces)
    assert d.values == tuple(range(n, n * faces + 1))
    assert as_dict(d) == brute_dice(n, faces)


@given(st.integers(1, 6), st.integers(1, 7))
def test_focus_count_is_binomial(n: int, bias: int) -> None:
    d = focus_count(n, bias)
    p = Fraction(bias, bias + 1)
    assert d.probs == tuple(comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1))


observations = st.one_of(
    st.sampled_from([Observation("even"), Observation("odd")]),
    st.builds(Observation, st.sampled_from(["smaller", "greater", "not-equal"]),
              st.integers(0, 20)),
)


@given(st.integers(1, 3), st.sampled_from([4, 6, 8]), st.lists(observations, min_size=1,
                                                               max_size=2))
def test_condition_matches_filtered_enumeration(n: int, faces: int, obs: list[Observation]) -> None:
    def keep(s: int) -> bool:
        return all(o.holds(s) for o in obs)

    prior = dice_sum(n, faces)
    if not any(keep(v) for v in prior.values):
        with pytest.raises(ValueError):
            condition(prior, obs)
        return
    assert as_dict(condition(prior, obs)) == brute_dice(n, faces, keep)


def test_observation_semantics() -> None:
    assert [Observation("smaller", 7).holds(x) for x in (6, 7, 8)] == [True, False, False]
    assert [Observation("greater", 7).holds(x) for x in (6, 7, 8)] == [False, False, True]
    assert [Observation("not-equal", 1).holds(x) for x in (1, 2)] == [False, True]
    assert Observation("greater", 3).text == "greater than 3"
    assert Observation("not-equal", 1).text == "not equal to 1"


@given(st.integers(0, 100), st.lists(st.integers(1, 50), min_size=3, max_size=3),
       st.lists(st.integers(1, 50), min_size=3, max_size=3))
def test_mixture_is_share_weighted_average(share: int, a: list[int], b: list[int]) -> None:
    d = mixture([share, 100 - share], [a, b])
    s = Fraction(share, 100)
    expected = tuple(s * Fraction(x, sum(a)) + (1 - s) * Fraction(y, sum(b))
                     for x, y in zip(a, b, strict=True))
    assert d.probs == expected


def test_mode_and_argmax() -> None:
    assert categorical([1, 3, 3]).argmax() == 1
    assert categorical([1, 3, 3]).unique_mode() is None
    assert categorical([1, 4, 3]).unique_mode() == 1


def test_invalid_distributions() -> None:
    with pytest.raises(ValueError):
        Exact((1, 2), (0, 0))
    with pytest.raises(ValueError):
        Exact((1, 1), (1, 1))
    with pytest.raises(ValueError):
        Exact((1,), (1, 2))
