"""Debiasing over Latin-square rotations: position bias cancels exactly under geometric pooling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from belieflens.episodes.latin import debias, latin_square


@given(
    k=st.integers(2, 7),
    data=st.data(),
)
@settings(max_examples=60, deadline=None)
def test_geometric_debias_cancels_additive_position_bias(k: int, data: st.DataObject) -> None:
    belief_logits = data.draw(arrays(np.float64, k, elements=st.floats(-5, 5)))
    bias = data.draw(arrays(np.float64, k, elements=st.floats(-8, 8)))
    sq = latin_square(k)
    logits = belief_logits[sq] + bias[None, :]  # [rotation, position]
    lp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    p = debias(lp, sq)
    truth = np.exp(belief_logits) / np.exp(belief_logits).sum()
    assert np.allclose(p, truth, atol=1e-9)
    assert p.sum() == pytest.approx(1.0)


def test_arithmetic_matches_mean_of_probabilities_and_both_normalise() -> None:
    rng = np.random.default_rng(0)
    lp = np.log(rng.dirichlet(np.ones(3), size=(4, 3)))  # [batch, rotation, option]
    sq = latin_square(3)
    a = debias(lp, sq, method="arithmetic")
    g = debias(lp, sq, method="geometric")
    assert a.shape == g.shape == (4, 3)
    assert np.allclose(a.sum(-1), 1) and np.allclose(g.sum(-1), 1)
    manual = np.zeros((4, 3))
    for r in range(3):
        for j in range(3):
            manual[:, sq[r, j]] += np.exp(lp[:, r, j]) / 3
    assert np.allclose(a, manual / manual.sum(-1, keepdims=True))


def test_arithmetic_does_not_cancel_bias_but_geometric_does() -> None:
    sq = latin_square(2)
    logits = np.array([[0.0, 0.0], [0.0, 0.0]]) + np.array([3.0, 0.0])  # pure position bias
    lp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert np.allclose(debias(lp, sq), [0.5, 0.5])
    assert np.allclose(debias(lp, sq, method="arithmetic"), [0.5, 0.5])


def test_bad_shapes() -> None:
    with pytest.raises(ValueError):
        debias(np.zeros((2, 3)), latin_square(2))
    with pytest.raises(ValueError):
        debias(np.zeros((2, 2)), latin_square(2), method="median")  # type: ignore[arg-type]
