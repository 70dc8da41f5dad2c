"""The arithmetic of ``twenty-questions`` (From Prompts to Posteriors, App. F.2), shared by the
environment (which filters its hypotheses and picks questions with it while building episodes)
and its analysis section (which recomputes the posteriors from the stored read-outs).

All functions are pure; probabilities are float64 numpy arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxtyping import Float

from belieflens.envs.twenty_questions.names import names_secret

THRESHOLD = 0.2
"""Both filters of the paper: a hypothesis leaves Θk when its compatibility is < 0.2 (F.2.2),
and the oracle drops it when any likelihood p(y_i | θ, ξ_i) is ≤ 0.2 (F.2.3)."""


def p_yes(lp_yes: float, lp_no: float) -> float:
    """P(Yes) from the log-probs of Yes and No, normalised so the two sum to 1."""
    m = max(lp_yes, lp_no)
    a, b = np.exp(lp_yes - m), np.exp(lp_no - m)
    return float(a / (a + b))


HEDGED = 0.5
"""p(y | θ, ξ) of a hedge (``Partly``) under every θ: the Yes/No read-out says nothing of how
likely a hedge is, so every hypothesis explains it alike (the posterior does not move, and the
oracle's filter keeps every θ)."""


def likelihood(p_yes_value: float, answer: str) -> float:
    """p(y | θ, ξ) of the answer given (``Yes`` / ``Correct!``: P(Yes); ``No``: 1 − P(Yes);
    a hedge, ``Partly``: :data:`HEDGED`)."""
    if answer == "Partly":
        return HEDGED
    return p_yes_value if answer in ("Yes", "Correct!") else 1.0 - p_yes_value


def keep_compatible(
    compat: Sequence[float], *, threshold: float = THRESHOLD, limit: int | None = None
) -> list[int]:
    """Indices of the hypotheses that stay in Θk: compatibility ≥ ``threshold`` (the paper drops
    those < 0.2), most compatible first (ties in input order), at most ``limit`` of them."""
    order = sorted(range(len(compat)), key=lambda j: (-compat[j], j))
    kept = [j for j in order if compat[j] >= threshold]
    return kept if limit is None else kept[:limit]


def model_posterior(compat: Float[np.ndarray, " theta"]) -> Float[np.ndarray, " theta"]:
    """The model's posterior over Θk: each hypothesis's P(Yes) normalised across Θk (all-NaN
    when Θk is empty or every score is 0)."""
    c = np.asarray(compat, dtype=np.float64)
    total = c.sum()
    if c.size == 0 or not total > 0:
        return np.full(c.shape, np.nan)
    return np.asarray(c / total, dtype=np.float64)


def oracle_posterior(
    lik: Float[np.ndarray, "theta step"], *, threshold: float = THRESHOLD
) -> Float[np.ndarray, " theta"]:
    """The oracle's posterior over Θk from the model's own likelihoods: a uniform prior times
    ∏_i p(y_i | θ, ξ_i), with θ dropped where any p(y_i | θ, ξ_i) ≤ ``threshold`` (all-NaN when
    no hypothesis survives)."""
    lk = np.asarray(lik, dtype=np.float64)
    if lk.ndim != 2:
        raise ValueError("likelihoods must be a (theta, step) matrix")
    keep = np.all(lk > threshold, axis=1)
    w = np.where(keep, np.prod(lk, axis=1), 0.0)
    total = w.sum()
    if lk.shape[0] == 0 or not total > 0:
        return np.full(lk.shape[0], np.nan)
    return np.asarray(w / total)


def kl_divergence(p: Float[np.ndarray, " theta"], q: Float[np.ndarray, " theta"]) -> float:
    """KL(p ‖ q) in nats (0 log 0 = 0; ``inf`` where p > 0 = q; NaN if either is NaN)."""
    a, b = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if a.size == 0 or np.isnan(a).any() or np.isnan(b).any():
        return float("nan")
    on = a > 0
    if np.any(b[on] <= 0):
        return float("inf")
    return float(np.sum(a[on] * (np.log(a[on]) - np.log(b[on]))))


def _entropy(p: Float[np.ndarray, " n"]) -> Float[np.ndarray, " n"]:
    """Binary entropy in nats, elementwise (0 at 0 and 1)."""
    q = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(np.where(q > 0, q * np.log(q), 0.0) + np.where(q < 1, (1 - q) * np.log1p(-q), 0.0))
    return np.asarray(h)


def eig(
    p_yes_matrix: Float[np.ndarray, "question theta"],
    weights: Float[np.ndarray, " theta"] | None = None,
) -> Float[np.ndarray, " question"]:
    """Expected information gain of each question over its outcomes (F.2.4):
    H[E_θ p(y | θ, ξ)] − E_θ H[p(y | θ, ξ)] in nats, with θ uniform over the sampled hypotheses
    (the model's game) or distributed as ``weights`` (normalised here: the active oracle's
    posterior); 0 for every question when no hypothesis is sampled."""
    m = np.asarray(p_yes_matrix, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError("EIG needs a (question, theta) matrix")
    if m.shape[1] == 0:
        return np.zeros(m.shape[0])
    if weights is None:
        return np.asarray(_entropy(m.mean(axis=1)) - _entropy(m).mean(axis=1))
    w = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    return np.asarray(_entropy(m @ w) - _entropy(m) @ w)


def mass_on(theta: Sequence[str], post: Float[np.ndarray, " theta"], secret: str) -> float:
    """A posterior ``post`` over ``theta``'s mass on ``secret``: on every hypothesis that names
    it (:func:`~.names.match`, the matcher of the guess rule: ``Vicuna`` and ``Zebras`` by
    name, ``Saiga`` by alias, ``Elephant`` for ``African elephant`` by its head noun); 0 when
    none does, NaN when Θ is empty."""
    if not len(theta):
        return float("nan")
    at = [j for j, t in enumerate(theta) if names_secret(t, secret)]
    return float(np.sum(np.asarray(post, dtype=np.float64)[at]))
