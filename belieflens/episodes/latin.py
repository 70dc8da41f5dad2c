"""The cyclic Latin square that assigns outcomes to answer positions, and pooling over it.

A probe with ``k`` outcomes is asked ``k`` times; under rotation ``r`` position ``j`` shows
outcome ``(r + j) % k`` (:func:`latin_square`). Every outcome appears once at every position,
so pooling read-outs over rotations (:func:`debias`) cancels any per-position preference of
the model.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Int

from belieflens.types import DebiasMethod

__all__ = ["debias", "latin_square"]


def latin_square(k: int) -> Int[np.ndarray, "rotation option"]:
    """The cyclic ``k x k`` Latin square: row ``r`` is the outcome shown at each position."""
    if k < 1:
        raise ValueError(f"latin_square needs k >= 1, got {k}")
    r = np.arange(k)[:, None]
    j = np.arange(k)[None, :]
    return np.asarray((r + j) % k, dtype=np.int64)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    z = x - m
    return np.asarray(z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True)))


def debias(
    logprob: Float[np.ndarray, "*batch rotation option"],
    outcome: Int[np.ndarray, "rotation option"],
    *,
    method: DebiasMethod = "geometric",
) -> Float[np.ndarray, "*batch outcome"]:
    """Pool option log-probs over rotations into a distribution over outcomes.

    ``logprob[..., r, j]`` is the log-probability of position ``j`` under rotation
    ``r``; ``outcome[r, j]`` is the outcome shown there. Log-probs are first
    renormalised over the options of each rotation.

    - ``geometric`` (default): mean of log-probs per outcome over rotations, then
      renormalise. Cancels any additive per-position logit bias exactly.
    - ``arithmetic``: mean of probabilities per outcome (BayesBench), renormalised.

    Returns probabilities over outcomes, shape ``[..., k]``, summing to 1.
    """
    lp = np.asarray(logprob, dtype=np.float64)
    out = np.asarray(outcome)
    if lp.shape[-2:] != out.shape:
        raise ValueError(f"logprob trailing shape {lp.shape[-2:]} != outcome shape {out.shape}")
    k = int(out.max()) + 1 if out.size else 0
    onehot = (out[..., None] == np.arange(k)).astype(np.float64)  # rotation option outcome
    counts = onehot.sum(axis=(0, 1))
    if np.any(counts == 0):
        raise ValueError("every outcome must be shown at least once")
    norm = _log_softmax(lp, axis=-1)
    if method == "geometric":
        mean = np.einsum("...ro,rok->...k", norm, onehot) / counts
        return np.asarray(np.exp(_log_softmax(mean, axis=-1)))
    if method == "arithmetic":
        p = np.einsum("...ro,rok->...k", np.exp(norm), onehot) / counts
        return np.asarray(p / p.sum(axis=-1, keepdims=True))
    raise ValueError(f"method must be 'geometric' or 'arithmetic', got {method!r}")
