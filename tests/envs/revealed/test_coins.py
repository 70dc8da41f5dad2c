"""Coins grid: counts and exact oracles against brute force over toss sequences."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from fractions import Fraction

import pytest

from belieflens.envs import get
from belieflens.envs.revealed.env import Coins, CoinsParams
from belieflens.errors import ParameterError


def brute(n: int, bias: int, offset: int = 0) -> dict[int, Fraction]:
    """P(focus count + offset), listing all 2**n sequences; focus has P = bias / (bias + 1)."""
    out: defaultdict[int, Fraction] = defaultdict(Fraction)
    p = Fraction(bias, bias + 1)
    for seq in itertools.product((True, False), repeat=n):
        w = Fraction(1)
        for is_focus in seq:
            w *= p if is_focus else 1 - p
        out[offset + sum(seq)] += w
    return dict(out)


def test_grid_counts() -> None:
    env = Coins(CoinsParams())
    by_variant = Counter(str(p.truth["variant"]) for p in env.points)
    configs = 2 * 3  # focus x bias
    per_prev = sum(n + 1 for n in (2, 3, 4)) * configs
    assert by_variant == {"regular": 3 * configs, "independent": per_prev, "dependent": per_prev}
    assert env.prompt_counts().revealed == 18 + 72 + 72
    # one stated question per possible count: regular sum(n+1) = 12, repeated sum((n+1)^2) = 50
    assert env.count() == configs * (12 + 50 + 50) == 672


def test_every_oracle_matches_brute_force() -> None:
    for ep in Coins(CoinsParams()).episodes(10_000, 0):
        t = ep.truth
        if t["has_revealed"] == 0:
            continue
        n, bias = int(t["coins"]), int(t["bias"])
        offset = int(t["previous"]) if t["variant"] == "dependent" else 0
        expected = brute(n, bias, offset)
        probe = ep.turns[0].probes[0]
        assert probe.labels == tuple(str(v) for v in sorted(expected))
        assert probe.oracle == pytest.approx([float(expected[v]) for v in sorted(expected)])
        assert math.isnan(float(t["previous"])) == (t["variant"] == "regular")


def test_three_coins_3_to_1_heads_total_with_previous_2() -> None:
    env = get("coins", coins=3, focus="Heads", bias=3, variant="dependent", style="belieflens")
    ep = next(e for e in env.episodes(100, 0)
              if e.truth["previous"] == 2.0 and e.truth["has_revealed"] == 1)
    probe = ep.turns[0].probes[0]
    assert probe.labels == ("2", "3", "4", "5")
    assert probe.oracle == pytest.approx([1 / 64, 9 / 64, 27 / 64, 27 / 64])
    assert ep.truth["mode"] == "" and ep.truth["target"] == "4"
    text = probe.queries[0].prefill
    assert "3 times more likely to land on Heads than on Tails" in text
    assert "The first time, 2 coins landed on Heads." in text
    assert text.endswith("The total number of Heads over both tosses is")


def test_bad_params() -> None:
    with pytest.raises(ParameterError, match="coins"):
        get("coins", coins=5)
    with pytest.raises(ParameterError, match="bias"):
        get("coins", bias=2)
