"""The stated-answer MCQ: candidates, distractors and rotations."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from belieflens.envs.revealed.stated import (
    LETTERS,
    candidates,
    distractors,
    percent_text,
    stated_probe,
    to_tenths,
)
from belieflens.episodes.latin import latin_square

probabilities = st.fractions(min_value=0, max_value=1, max_denominator=200)


@given(probabilities, st.integers(0, 2**32 - 1))
def test_distractors_never_duplicate_and_are_deterministic(p: Fraction, seed: int) -> None:
    c = to_tenths(p)
    d = distractors(c, np.random.default_rng(seed))
    assert d == distractors(c, np.random.default_rng(seed))
    assert len(d) == 4
    values = (c, *d)
    assert all(0 <= v <= 1000 for v in values)
    assert len({percent_text(v) for v in values}) == 5
    assert all(abs(a - b) >= 10 for i, a in enumerate(values) for b in values[i + 1:])


@given(probabilities, st.integers(0, 2**32 - 1))
def test_candidates_hold_the_correct_value(p: Fraction, seed: int) -> None:
    cands = candidates(p, np.random.default_rng(seed))
    assert list(cands.tenths) == sorted(cands.tenths)
    assert cands.labels[cands.correct] == percent_text(to_tenths(p))
    assert len(set(cands.labels)) == 5


def test_rounding_and_text() -> None:
    assert to_tenths(Fraction(1, 6)) == 167
    assert to_tenths(Fraction(1, 2000)) == 1  # half up
    assert percent_text(167) == "16.7%"
    assert percent_text(1000) == "100.0%"
    assert percent_text(5) == "0.5%"


def test_different_seeds_give_different_distractors() -> None:
    draws = {distractors(250, np.random.default_rng(s)) for s in range(20)}
    assert len(draws) > 15


def test_stated_probe_rotations() -> None:
    cands = candidates(Fraction(1, 6), np.random.default_rng(0))
    probe = stated_probe("I roll a die.", "What is the probability of 3?", cands, "raw")
    assert probe.name == "stated" and probe.kind == "mcq" and probe.oracle is None
    assert probe.labels == cands.labels
    square = latin_square(5)
    assert len(probe.queries) == 5
    for r, q in enumerate(probe.queries):
        assert q.rotation == r
        assert q.outcome == tuple(int(o) for o in square[r])
        assert q.options == tuple(f" [[{x}]]" for x in LETTERS)
        assert q.format == "raw"
        assert q.prefill.endswith("\nAnswer:")
        for j, o in enumerate(q.outcome):
            assert f"[[{LETTERS[j]}]] {cands.labels[o]}\n" in q.prefill
    chat = stated_probe("I roll a die.", "What is the probability of 3?", cands, "chat")
    assert chat.queries[0].prefill == "Answer:"
    assert "[[A]]" in chat.queries[0].messages[-1].content
