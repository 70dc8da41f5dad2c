"""The belief-state geometry on synthetic files whose answers are known: a residual that holds
the belief linearly is found (R² near 1, shuffled near 0), one that holds only the last token
reaches the last-1 baseline and no more, and RRXOR's beliefs are not a function of its
next-token distribution."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from belieflens.analysis.geometry import (
    cross_entropy,
    geometry,
    last_tokens,
    lookup_heldout,
    regressed,
)
from belieflens.envs.tokens.process import get
from belieflens.errors import ParameterError


def synthetic(name: str, n: int = 300, length: int = 8, noise: float = 0.01,
              seed: int = 0) -> xr.Dataset:
    """A file-shaped Dataset of process ``name``: layer 0 holds the last token one-hot, layer
    1 an affine image of the belief plus noise; the model predicts the oracle exactly."""
    proc = get(name, length=length)
    tokens = proc.sample(n, seed).tokens
    beliefs, nexts = proc.beliefs(tokens), proc.next_token(tokens)
    rng = np.random.default_rng(seed)
    t1 = length + 1
    q = n * t1
    vocab, states = len(proc.symbols), len(proc.states)
    ids = np.full((q, t1), -1, dtype=np.int32)
    pos = np.tile(np.arange(t1), n)
    for e in range(n):
        for t in range(t1):
            ids[e * t1 + t, 0] = vocab
            ids[e * t1 + t, 1:t + 1] = tokens[e, :t]
    b = beliefs.reshape(q, states)
    last = np.where(pos > 0, ids[np.arange(q), pos], vocab)
    d = 16
    layer0 = np.eye(d)[last]
    layer1 = b @ rng.normal(size=(states, d)) + 0.3 + noise * rng.normal(size=(q, d))
    resid = np.stack([layer0, layer1], axis=1).astype(np.float32)
    oracle = nexts.reshape(q, vocab)
    return xr.Dataset(
        {"resid": (("query", "layer", "d_model"), resid),
         "belief_state": (("query", "state"), b),
         "state_label": (("state",), np.array(proc.states)),
         "oracle": (("query", "outcome"), oracle),
         "outcome_label": (("query", "outcome"), np.tile(np.array(proc.symbols), (q, 1))),
         "option_logprob": (("query", "option"), np.log(np.maximum(oracle, 1e-300))),
         "input_ids": (("query", "token"), ids), "answer_pos": (("query",), pos)},
        coords={"episode": ("query", np.repeat(np.arange(n), t1)), "turn": ("query", pos)},
        attrs={"env_name": name},
    )


def test_a_linear_belief_is_found_and_the_shuffled_control_is_not() -> None:
    g = geometry(synthetic("mess3"), np.random.default_rng(0), n_folds=3)
    assert g["r2"].dims == ("layer",) and g["r2_linear_last"].dims == ("lag",)
    assert float(g.r2.sel(layer=1)) > 0.99 and float(g.r2_concat) > 0.99
    assert abs(float(g.r2_shuffled.sel(layer=1))) < 0.1
    # layer 0 holds the last token only: the last-1 baselines, no more
    assert float(g.r2.sel(layer=0)) == pytest.approx(float(g.r2_linear_last.sel(lag=1)),
                                                     abs=0.02)
    assert float(g.r2.sel(layer=0)) < float(g.r2_lookup_last.sel(lag=3))
    assert g.attrs["best_layer"] == 1


def test_rrxor_beliefs_are_not_a_function_of_the_next_token() -> None:
    g = geometry(synthetic("rrxor"), np.random.default_rng(0), n_folds=3)
    assert float(g.r2.sel(layer=1)) > 0.99
    assert float(g.r2_next_token) < 0.9  # the paper's contrast
    m = geometry(synthetic("mess3"), np.random.default_rng(0), n_folds=3)
    assert float(m.r2_next_token) > 0.99  # Mess3's emission matrix is invertible


def test_last_tokens_and_lookup() -> None:
    ds = synthetic("mess3", n=4, length=3)
    lt = last_tokens(ds, 2)
    ids = np.asarray(ds.input_ids.values)
    assert lt[0].tolist() == [-1, -1] and lt[1].tolist() == [-1, int(ids[1, 1])]
    assert lt[3].tolist() == [int(ids[3, 2]), int(ids[3, 3])]
    codes = np.array([[0], [0], [1], [1]])
    y = np.array([[1.0], [3.0], [5.0], [7.0]])
    pred = lookup_heldout(codes, y, np.array([0, 1, 0, 1]))
    assert pred.ravel().tolist() == [3.0, 1.0, 7.0, 5.0]


def test_cross_entropy_of_an_exact_model_is_optimal() -> None:
    ce = cross_entropy(synthetic("mess3"))
    assert ce["ratio"].dims == ("turn",) and np.allclose(ce["ratio"], 1.0)
    assert float(ce.optimal.sel(turn=0)) == pytest.approx(np.log(3))


def test_regressed_points_and_bad_arguments() -> None:
    ds = synthetic("mess3")
    r = regressed(ds, np.random.default_rng(0), layer=1, n_folds=3)
    assert r.dims == ("query", "state") and list(r.state.values) == ["A", "B", "C"]
    assert np.abs(r.values - ds.belief_state.values).max() < 0.1
    with pytest.raises(ParameterError, match="belief_state or oracle"):
        geometry(ds, np.random.default_rng(0), target="nope")
    with pytest.raises(ParameterError, match="lags"):
        geometry(ds, np.random.default_rng(0), lags=(0,))
    with pytest.raises(ParameterError, match="no belief_state"):
        geometry(ds.drop_vars("belief_state"), np.random.default_rng(0))
