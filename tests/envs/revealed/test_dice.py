"""Dice grid: counts, exact oracles against brute force, texts."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction

import pytest

from belieflens.envs import get
from belieflens.envs.revealed.dice import middle
from belieflens.envs.revealed.env import Dice, DiceParams
from belieflens.errors import ParameterError

CONFIGS = [(n, f) for n in (1, 2, 3) for f in (4, 6, 8, 10, 12)]


def brute(n: int, faces: int, keep: Callable[[int], bool] = lambda s: True) -> Counter[int]:
    return Counter(s for r in itertools.product(range(1, faces + 1), repeat=n)
                   if keep(s := sum(r)))


def predicate(text: str) -> Callable[[int], bool]:
    if text == "even":
        return lambda s: s % 2 == 0
    if text == "odd":
        return lambda s: s % 2 == 1
    *words, value = text.split()
    v = int(value)
    return {"smaller than": lambda s: s < v, "greater than": lambda s: s > v,
            "not equal to": lambda s: s != v}[" ".join(words)]


def all_of(preds: Sequence[Callable[[int], bool]]) -> Callable[[int], bool]:
    return lambda s: all(p(s) for p in preds)


@pytest.mark.parametrize("observations", ["all", "multiple"])
def test_grid_counts(observations: str) -> None:
    env = Dice(DiceParams(observations=observations))  # type: ignore[arg-type]
    by_variant = Counter(str(p.truth["variant"]) for p in env.points)
    least = 1 if observations == "all" else 2
    ranges = sum(n * f - n + 1 for n, f in CONFIGS)
    obs = 0
    for n, f in CONFIGS:
        m = (n + n * f) // 2
        preds = [predicate(x) for x in ("even", "odd", f"smaller than {m}", f"greater than {m}",
                                        "not equal to 1", f"not equal to {m}")]
        combos = [(p,) for p in preds] + list(itertools.combinations(preds, 2))
        obs += sum(len(brute(n, f, all_of(c))) >= least for c in combos)
    assert by_variant == {"single": 15, "independent": ranges, "dependent": ranges,
                          "observation": obs}
    # the paper keeps the 14 sets that leave a single result ("smaller than 2" on a d4)
    assert (ranges, obs) == (225, 283 if observations == "all" else 269)
    assert env.prompt_counts().revealed == 15 + 2 * 225 + obs
    # one stated question per possible outcome of every scenario
    assert env.count() == sum(sum(p > 0 for p in pt.probs) for pt in env.points)
    six = get("dice", dice=2, faces=6, variant="independent", stated="first")
    assert six.count() == 11  # type: ignore[attr-defined]


@pytest.mark.parametrize("support", ["prior", "posterior"])
def test_every_oracle_matches_brute_force(support: str) -> None:
    env = Dice(DiceParams(support=support))  # type: ignore[arg-type]
    seen = 0
    for ep in env.episodes(100_000, 0):
        t = ep.truth
        n, f, variant = int(t["dice"]), int(t["faces"]), t["variant"]
        if t["has_revealed"] == 0:
            (stated,) = ep.turns[0].probes
            assert stated.labels[int(t["stated_correct"])] == t["stated_answer"]
            assert float(t["stated_p"]) > 0
            continue
        seen += 1
        (probe, stated) = ep.turns[0].probes
        if variant == "observation":
            preds = [predicate(x) for x in str(t["observation"]).split(" and ")]
            counts = brute(n, f, all_of(preds))
            labels = range(n, n * f + 1) if support == "prior" else sorted(counts)
        elif variant == "dependent":
            prev = int(t["previous"])
            counts = Counter({prev + s: c for s, c in brute(n, f).items()})
            labels = range(prev + n, prev + n * f + 1)
        else:
            counts = brute(n, f)
            labels = range(n, n * f + 1)
            assert math.isnan(float(t["previous"])) == (variant == "single")
        total = sum(counts.values())
        assert probe.labels == tuple(str(v) for v in labels)
        assert probe.oracle == pytest.approx([counts[v] / total for v in labels], abs=1e-15)
        target = int(str(t["target"]))
        assert t["stated_p"] == pytest.approx(counts[target] / total)
        assert counts[target] == max(counts.values())
        assert stated.labels[int(t["stated_correct"])] == t["stated_answer"]
    assert seen == env.prompt_counts().revealed


def test_two_dice_even_and_greater_than_middle_text() -> None:
    env = Dice(DiceParams(dice=2, faces=6, variant="observation", style="belieflens"))
    said = "even and greater than 7"
    ep = next(e for e in env.episodes(100, 0) if e.truth["observation"] == said)
    assert middle(2, 6) == 7
    probe = ep.turns[0].probes[0]
    assert probe.queries[0].prefill == (
        "I roll two fair 6-sided dice with faces numbered 1 to 6 and add up the numbers they "
        "show. I tell you that the sum is even and greater than 7. The sum is"
    )
    # sums 8, 10, 12: 5, 3, 1 ways of 9
    assert dict(zip(probe.labels, probe.oracle or (), strict=True))["8"] == pytest.approx(5 / 9)
    assert ep.truth["mode"] == "8"


def test_prefix_ambiguous_outcomes_get_a_terminator() -> None:
    ep = next(Dice(DiceParams(dice=1, faces=12, variant="single")).episodes(1, 0))
    q = ep.turns[0].probes[0].queries[0]
    assert q.options[0] == " 1" and q.options[-1] == " 12" and q.terminator == "."


def test_single_fair_die_has_no_unique_mode() -> None:
    params = DiceParams(dice=1, faces=6, variant="single", style="belieflens", stated="mode")
    eps = list(Dice(params).episodes(10, 0))
    ep = eps[0]
    assert ep.truth["mode"] == "" and ep.truth["target"] == "1" and ep.truth["ties"] == 6
    assert ep.truth["stated_answer"] == "16.7%"
    # a six-way tie: one stated question per tied outcome, the revealed read-out once
    assert [e.truth["target"] for e in eps] == ["1", "2", "3", "4", "5", "6"]
    assert [len(e.turns[0].probes) for e in eps] == [2, 1, 1, 1, 1, 1]
    assert ep.turns[0].probes[0].oracle == pytest.approx([Fraction(1, 6)] * 6)


@pytest.mark.parametrize("name, value", [("dice", "4"), ("faces", "7"), ("variant", "double"),
                                          ("format", "html"), ("support", "x")])
def test_bad_params(name: str, value: str) -> None:
    with pytest.raises(ParameterError, match=name):
        get("dice", **{name: value})
