"""Dutch books: hand-checked sure losses and the LP against a brute-force coherence check."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belieflens.envs.dutch_book.coherence import (
    extensionality_book,
    find_book,
    incidence_matrix,
    monotonicity_book,
    nested_incidence,
    normalisation_book,
    payoff,
    scenario_book,
    scenario_events,
)
from belieflens.envs.dutch_book.scenarios import ScenarioKind


def test_normalisation_over_one() -> None:
    book = normalisation_book(0.6, 0.5)
    assert book.sure_loss == pytest.approx(0.1)
    assert book.stakes == (1.0, 1.0)
    assert book.is_book


def test_normalisation_under_one_sells_both() -> None:
    book = normalisation_book(0.3, 0.5)
    assert book.sure_loss == pytest.approx(0.2)
    assert book.stakes == (-1.0, -1.0)


def test_normalisation_coherent_has_no_book() -> None:
    book = normalisation_book(0.25, 0.75)
    assert book.sure_loss == 0.0
    assert not book.is_book


def test_monotonicity_sums_the_drops() -> None:
    # A1 ⊂ ... ⊂ A6; drops 0.3 -> 0.2 (0.1) and 0.6 -> 0.4 (0.2)
    p = [0.3, 0.2, 0.5, 0.6, 0.4, 0.9]
    book = monotonicity_book(p)
    assert book.sure_loss == pytest.approx(0.3)
    pay = payoff(book.stakes, p, nested_incidence(6))
    assert np.all(pay <= -0.3 + 1e-12)


def test_monotonicity_nondecreasing_is_coherent() -> None:
    assert monotonicity_book([0.1, 0.1, 0.2, 0.5, 0.8, 1.0]).sure_loss == 0.0


def test_extensionality_loss_is_the_gap() -> None:
    book = extensionality_book(0.7, 0.45)
    assert book.sure_loss == pytest.approx(0.25)
    assert book.stakes == (1.0, -1.0)
    assert extensionality_book(0.4, 0.4).sure_loss == 0.0


def test_lp_matches_hand_constructions() -> None:
    cases: list[tuple[ScenarioKind, list[float]]] = [
        ("normalisation", [0.6, 0.5]),
        ("normalisation", [0.1, 0.3]),
        ("extensionality", [0.8, 0.5]),
        ("extensionality", [0.2, 0.6, 0.5]),
    ]
    for kind, p in cases:
        res = find_book(p, scenario_events(kind, len(p)))
        assert res.book.sure_loss == pytest.approx(scenario_book(kind, p).sure_loss)
    mono = [0.3, 0.2, 0.5, 0.6, 0.4, 0.9]
    res = find_book(mono, scenario_events("monotonicity", 6))
    assert not res.coherent
    assert res.book.sure_loss >= monotonicity_book(mono).sure_loss - 1e-9


def test_lp_proves_coherence_with_a_witness() -> None:
    a = incidence_matrix([{0, 1}, {1, 2}, {1}], 3)
    # q0 + q1 = 0.5, q1 + q2 = 0.7, q1 = 0.3 force q = (0.2, 0.3, 0.4), total 0.9: incoherent
    p = [0.5, 0.7, 0.3]
    res = find_book(p, a)
    assert not res.coherent
    p = [0.5, 0.8, 0.3]  # q = (0.2, 0.3, 0.5)
    res = find_book(p, a)
    assert res.coherent
    assert res.witness is not None
    assert np.allclose(a.T @ np.array(res.witness), p, atol=1e-9)
    assert res.book.sure_loss == 0.0


def test_find_book_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        find_book([1.2], incidence_matrix([{0}], 2))
    with pytest.raises(ValueError):
        find_book([0.5, 0.5], incidence_matrix([{0}], 2))
    with pytest.raises(ValueError):
        incidence_matrix([{3}], 2)


def _brute_force_coherent(p: np.ndarray, a: np.ndarray) -> bool:
    """Whether p is a convex combination of the rows of a (Carathéodory: try every subset)."""
    n_out = a.shape[0]
    target = np.concatenate([p, [1.0]])
    for size in range(1, n_out + 1):
        for rows in itertools.combinations(range(n_out), size):
            mat = np.vstack([a[list(rows)].T, np.ones((1, size))])
            q, *_ = np.linalg.lstsq(mat, target, rcond=None)
            if np.allclose(mat @ q, target, atol=1e-9) and np.all(q >= -1e-9):
                return True
    return False


@st.composite
def _problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n_out = draw(st.integers(1, 4))
    m = draw(st.integers(1, 4))
    subsets = st.sets(st.integers(0, n_out - 1), max_size=n_out)
    events = [draw(subsets) for _ in range(m)]
    grid = draw(st.lists(st.integers(0, 10), min_size=m, max_size=m))
    return np.array(grid, dtype=np.float64) / 10, incidence_matrix(events, n_out)


@settings(max_examples=300, deadline=None)
@given(_problems())
def test_lp_finds_a_book_exactly_when_incoherent(problem: tuple[np.ndarray, np.ndarray]) -> None:
    p, a = problem
    res = find_book(p, a)
    assert res.coherent == _brute_force_coherent(p, a)
    if res.coherent:
        assert res.witness is not None
        assert np.allclose(a.T @ np.array(res.witness), p, atol=1e-7)
    else:
        pay = payoff(res.book.stakes, p, a)
        assert np.all(pay <= -res.book.sure_loss + 1e-9)
        assert res.book.sure_loss > 1e-9
        assert max(abs(s) for s in res.book.stakes) <= 1 + 1e-9


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=2, max_size=6))
def test_monotonicity_book_is_a_book_exactly_when_a_drop(levels: list[int]) -> None:
    p = np.array(levels) / 20
    book = monotonicity_book(p)
    drops = np.clip(p[:-1] - p[1:], 0, None).sum()
    assert book.sure_loss == pytest.approx(drops, abs=1e-12)
    assert find_book(p, nested_incidence(len(p))).coherent == (drops == 0)
