"""Dutch books: sure-loss constructions and a general arbitrage finder over credences.

Betting convention (de Finetti). A credence ``p`` in event ``E`` is a price: the
agent will buy or sell, at price ``p``, a ticket that pays 1 if ``E`` happens.
A stake ``s > 0`` buys ``s`` tickets, ``s < 0`` sells ``|s|``. At outcome ``w``
the agent's net payoff is ``sum_i s_i * (1[w in E_i] - p_i)``. A Dutch book is a
stake vector whose payoff is negative at every outcome; its *sure loss* is the
smallest loss over outcomes, ``-max_w payoff(w)``.

Stakes are bounded by ``|s_i| <= 1`` so the sure loss is on the scale of one
ticket. By de Finetti's theorem, credences admit a Dutch book exactly when no
probability distribution over outcomes reproduces them; :func:`find_book`
returns either a book or such a distribution as the proof of coherence.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from belieflens.envs.dutch_book.scenarios import ScenarioKind

TOL = 1e-9
"""Sure losses at or below this are treated as zero (numerical coherence)."""


@dataclass(frozen=True)
class DutchBook:
    """A stake vector and the loss it guarantees.

    Attributes:
        stakes: tickets bought (> 0) or sold (< 0) on each event, ``|s_i| <= 1``.
        sure_loss: the smallest loss over outcomes (``>= 0``; 0 means no book).
    """

    stakes: tuple[float, ...]
    sure_loss: float

    @property
    def is_book(self) -> bool:
        """Whether the stakes lose money at every outcome (sure loss above :data:`TOL`)."""
        return self.sure_loss > TOL


@dataclass(frozen=True)
class ArbitrageResult:
    """What :func:`find_book` proves about a set of credences.

    Attributes:
        coherent: no Dutch book exists.
        book: the book of maximal sure loss (stakes all 0 and loss 0 when coherent).
        witness: when coherent, a probability distribution over outcomes whose
            event probabilities equal the credences (the proof); else ``None``.
    """

    coherent: bool
    book: DutchBook
    witness: tuple[float, ...] | None


def _check_credences(credences: ArrayLike) -> np.ndarray:
    p = np.asarray(credences, dtype=np.float64)
    if p.ndim != 1 or not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError(f"credences must be numbers in [0, 1], got {p.tolist()!r}")
    return p


def payoff(stakes: ArrayLike, credences: ArrayLike, incidence: ArrayLike) -> np.ndarray:
    """The agent's net payoff at every outcome; ``incidence[w, i] = 1[w in E_i]``."""
    s = np.asarray(stakes, dtype=np.float64)
    p = np.asarray(credences, dtype=np.float64)
    return np.asarray((np.asarray(incidence, dtype=np.float64) - p[None, :]) @ s)


def _book(stakes: np.ndarray, credences: np.ndarray, incidence: np.ndarray) -> DutchBook:
    loss = max(0.0, -float(payoff(stakes, credences, incidence).max()))
    return DutchBook(tuple(float(x) for x in stakes), loss)


def incidence_matrix(events: Sequence[Collection[int]], n_outcomes: int) -> np.ndarray:
    """The ``outcome x event`` 0/1 matrix of events given as sets of outcome indices."""
    m = np.zeros((n_outcomes, len(events)), dtype=np.float64)
    for i, event in enumerate(events):
        for w in event:
            if not 0 <= w < n_outcomes:
                raise ValueError(f"event {i} names outcome {w}, outside 0..{n_outcomes - 1}")
            m[w, i] = 1.0
    return m


def normalisation_book(p_event: float, p_complement: float) -> DutchBook:
    """Book against credences in an event and its complement that do not sum to 1.

    If they sum to more than 1 the agent buys both tickets (pays the sum, wins
    exactly 1); if less, it sells both. Sure loss ``|p(A) + p(not A) - 1|``.
    """
    p = _check_credences([p_event, p_complement])
    sign = 1.0 if p.sum() > 1 else (-1.0 if p.sum() < 1 else 0.0)
    return _book(np.array([sign, sign]), p, incidence_matrix([{0}, {1}], 2))


def monotonicity_book(credences: ArrayLike) -> DutchBook:
    """Book against credences in nested events ``A1 ⊂ A2 ⊂ ... ⊂ An`` that ever decrease.

    For every adjacent pair with ``p(A_i) > p(A_{i+1})`` the agent buys ``A_i``
    and sells ``A_{i+1}``. Sure loss: the sum of the drops,
    ``sum_i max(0, p(A_i) - p(A_{i+1}))`` (attained at an outcome inside ``A1``).
    """
    p = _check_credences(credences)
    n = len(p)
    s = np.zeros(n)
    for i in range(n - 1):
        if p[i] > p[i + 1]:
            s[i] += 1.0
            s[i + 1] -= 1.0
    return _book(s, p, nested_incidence(n))


def nested_incidence(n: int) -> np.ndarray:
    """Incidence of nested events ``A1 ⊂ ... ⊂ An`` on ``n + 1`` outcomes.

    Outcome ``w`` (``0..n``) is "inside ``A_{w+1}`` but not ``A_w``"; outcome ``n``
    is outside every event.
    """
    return incidence_matrix([set(range(i + 1)) for i in range(n)], n + 1)


def extensionality_book(p_first: float, p_second: float) -> DutchBook:
    """Book against two wordings of one event priced differently.

    The agent buys the dearer wording and sells the cheaper; the tickets cancel
    at every outcome. Sure loss ``|p1 - p2|``.
    """
    p = _check_credences([p_first, p_second])
    d = np.sign(p[0] - p[1])
    return _book(np.array([d, -d]), p, incidence_matrix([{0}, {0}], 2))


def scenario_events(kind: ScenarioKind, n_questions: int) -> np.ndarray:
    """The incidence matrix of a scenario's events (one column per question)."""
    if kind == "normalisation":
        if n_questions != 2:
            raise ValueError("a normalisation scenario has exactly 2 questions")
        return incidence_matrix([{0}, {1}], 2)
    if kind == "extensionality":
        if n_questions < 2:
            raise ValueError("an extensionality scenario has at least 2 questions")
        return incidence_matrix([{0}] * n_questions, 2)
    if kind == "monotonicity":
        if n_questions < 2:
            raise ValueError("a monotonicity scenario has at least 2 questions")
        return nested_incidence(n_questions)
    raise ValueError(f"unknown scenario kind {kind!r}")


def scenario_book(kind: ScenarioKind, credences: ArrayLike) -> DutchBook:
    """The hand construction of :func:`normalisation_book` and friends, chosen by ``kind``.

    Extensionality scenarios with more than two wordings use the most and least
    credible wordings.
    """
    p = _check_credences(credences)
    if kind == "normalisation":
        if len(p) != 2:
            raise ValueError("a normalisation scenario has exactly 2 credences")
        return normalisation_book(float(p[0]), float(p[1]))
    if kind == "monotonicity":
        return monotonicity_book(p)
    if kind == "extensionality":
        if len(p) < 2:
            raise ValueError("an extensionality scenario has at least 2 credences")
        hi, lo = int(np.argmax(p)), int(np.argmin(p))
        s = np.zeros(len(p))
        if hi != lo and p[hi] > p[lo]:
            s[hi], s[lo] = 1.0, -1.0
        return _book(s, p, scenario_events(kind, len(p)))
    raise ValueError(f"unknown scenario kind {kind!r}")


def find_book(credences: ArrayLike, incidence: ArrayLike) -> ArbitrageResult:
    """Find the Dutch book of maximal sure loss, or prove the credences coherent.

    Solves ``max t`` over stakes ``s`` in ``[-1, 1]^m`` subject to
    ``payoff(s)(w) <= -t`` at every outcome ``w`` (a linear program). ``t > 0``
    is a book. Otherwise the credences are coherent and a second linear program
    finds a distribution ``q`` over outcomes with ``incidence.T @ q = credences``,
    returned as ``witness``.

    Args:
        credences: one credence in ``[0, 1]`` per event.
        incidence: ``outcome x event`` 0/1 matrix (see :func:`incidence_matrix`).
    """
    p = _check_credences(credences)
    a = np.asarray(incidence, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != len(p) or a.shape[0] < 1:
        raise ValueError(f"incidence must be outcome x event with {len(p)} events, got {a.shape}")
    n_out, m = a.shape
    gain = a - p[None, :]  # outcome x event: payoff per unit stake
    # variables: s (m), t; minimise -t; gain @ s + t <= 0
    c = np.zeros(m + 1)
    c[-1] = -1.0
    a_ub = np.hstack([gain, np.ones((n_out, 1))])
    bounds = [(-1.0, 1.0)] * m + [(None, None)]
    from scipy.optimize import linprog  # imported on use: it is slow to import

    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(n_out), bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - the LP is always feasible (s = 0, t = 0)
        raise RuntimeError(f"arbitrage LP failed: {res.message}")
    stakes = np.asarray(res.x[:m])
    book = _book(stakes, p, a)
    if book.is_book:
        return ArbitrageResult(False, book, None)
    zero = DutchBook(tuple(0.0 for _ in range(m)), 0.0)
    return ArbitrageResult(True, zero, _witness(p, a))


def _witness(p: np.ndarray, a: np.ndarray) -> tuple[float, ...] | None:
    n_out = a.shape[0]
    a_eq = np.vstack([a.T, np.ones((1, n_out))])
    b_eq = np.concatenate([p, [1.0]])
    from scipy.optimize import linprog  # imported on use: it is slow to import

    res = linprog(np.zeros(n_out), A_eq=a_eq, b_eq=b_eq, bounds=[(0.0, None)] * n_out,
                  method="highs")
    if res.status != 0:
        return None
    q = np.clip(np.asarray(res.x), 0.0, None)
    return tuple(float(x) for x in q / q.sum())
