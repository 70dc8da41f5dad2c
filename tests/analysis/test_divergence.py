"""Property tests for the divergences in ``belieflens.analysis.divergence``."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import xarray as xr
from hypothesis import example, given, settings
from hypothesis import strategies as st

from belieflens.analysis.divergence import chebyshev, js, kl, l1, mae, sym_kl, tvd
from belieflens.dims import OUTCOME, QUERY

Div = Callable[..., xr.DataArray]
ALL: dict[str, Div] = {
    "tvd": tvd,
    "l1": l1,
    "chebyshev": chebyshev,
    "kl": kl,
    "sym_kl": sym_kl,
    "js": js,
}
SYMMETRIC = ("tvd", "l1", "chebyshev", "js", "sym_kl")
TOL = 1e-9


@st.composite
def distributions(draw: st.DrawFn, k: int | None = None, zeros: bool = True) -> np.ndarray:
    """A probability vector, possibly with exact zeros (and tiny masses)."""
    size = draw(st.integers(1, 8)) if k is None else k
    lo = 0.0 if zeros else 1e-6
    w = np.array(draw(st.lists(st.floats(lo, 1.0), min_size=size, max_size=size)))
    if w.sum() <= 0:
        w[draw(st.integers(0, size - 1))] = 1.0
    return np.asarray(w / w.sum())


@st.composite
def pairs(draw: st.DrawFn, zeros: bool = True) -> tuple[xr.DataArray, xr.DataArray]:
    """Two distributions over the same ``outcome`` dimension."""
    k = draw(st.integers(1, 8))
    p = draw(distributions(k, zeros))
    q = draw(distributions(k, zeros))
    return xr.DataArray(p, dims=[OUTCOME]), xr.DataArray(q, dims=[OUTCOME])


def _val(x: xr.DataArray) -> float:
    return float(x.values)


_W = np.array([0.0, 0.6066357757671799, 0.0, 0.7294965609839984])
_DISJOINT = (xr.DataArray(_W / _W.sum(), dims=[OUTCOME]),
             xr.DataArray((_W / _W.sum())[[1, 0, 3, 2]], dims=[OUTCOME]))
"""Disjoint supports, each summing to 1 only up to rounding: the distances reach their upper
bounds, and TVD passes 1 by an ulp."""


@settings(max_examples=60, deadline=None)
@given(pairs())
@example(_DISJOINT)
def test_ranges(pq: tuple[xr.DataArray, xr.DataArray]) -> None:
    """Each distance within its range, up to TOL: a normalised float vector sums to 1 only up
    to rounding, and at disjoint supports TVD is half the two sums."""
    p, q = pq
    assert 0.0 <= _val(tvd(p, q)) <= 1.0 + TOL
    assert 0.0 <= _val(l1(p, q)) <= 2.0 + TOL
    assert 0.0 <= _val(chebyshev(p, q)) <= 1.0 + TOL
    assert 0.0 <= _val(js(p, q)) <= math.log(2) + TOL
    assert _val(kl(p, q)) >= 0.0
    assert _val(sym_kl(p, q)) >= 0.0
    assert _val(mae(p, q)) >= 0.0


@settings(max_examples=60, deadline=None)
@given(pairs())
def test_orderings(pq: tuple[xr.DataArray, xr.DataArray]) -> None:
    p, q = pq
    assert _val(tvd(p, q)) == pytest.approx(0.5 * _val(l1(p, q)))
    assert _val(chebyshev(p, q)) <= _val(tvd(p, q)) + TOL
    # Pinsker: TVD <= sqrt(KL / 2); JS <= TVD * ln 2 (Lin 1991, in nats).
    assert _val(tvd(p, q)) <= math.sqrt(_val(kl(p, q)) / 2) + 1e-6
    assert _val(js(p, q)) <= _val(tvd(p, q)) * math.log(2) + TOL


@settings(max_examples=60, deadline=None)
@given(pairs())
def test_symmetry(pq: tuple[xr.DataArray, xr.DataArray]) -> None:
    p, q = pq
    for name in SYMMETRIC:
        fn = ALL[name]
        assert _val(fn(p, q)) == pytest.approx(_val(fn(q, p)), abs=1e-12), name


def test_kl_is_not_symmetric() -> None:
    p = xr.DataArray([0.9, 0.1], dims=[OUTCOME])
    q = xr.DataArray([0.5, 0.5], dims=[OUTCOME])
    assert _val(kl(p, q)) != pytest.approx(_val(kl(q, p)))


@settings(max_examples=60, deadline=None)
@given(distributions())
def test_zero_on_equal(p_: np.ndarray) -> None:
    p = xr.DataArray(p_, dims=[OUTCOME])
    for name, fn in ALL.items():
        assert _val(fn(p, p)) == 0.0, name
    assert _val(mae(p, p)) == 0.0


@settings(max_examples=60, deadline=None)
@given(pairs(zeros=False))
def test_positive_on_unequal(pq: tuple[xr.DataArray, xr.DataArray]) -> None:
    p, q = pq
    if np.max(np.abs(p.values - q.values)) < 1e-4:
        return
    for name, fn in ALL.items():
        assert _val(fn(p, q)) > 0.0, name


def test_known_values() -> None:
    p = xr.DataArray([1.0, 0.0], dims=[OUTCOME])
    q = xr.DataArray([0.0, 1.0], dims=[OUTCOME])
    assert _val(tvd(p, q)) == pytest.approx(1.0)
    assert _val(l1(p, q)) == pytest.approx(2.0)
    assert _val(chebyshev(p, q)) == pytest.approx(1.0)
    assert _val(js(p, q)) == pytest.approx(math.log(2))
    # q is floored at 1e-12: KL is large and finite, not inf.
    assert _val(kl(p, q)) == pytest.approx(-math.log(1e-12))

    a = xr.DataArray([0.5, 0.5], dims=[OUTCOME])
    b = xr.DataArray([0.25, 0.75], dims=[OUTCOME])
    expected_kl = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert _val(kl(a, b)) == pytest.approx(expected_kl)
    expected_rev = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert _val(sym_kl(a, b)) == pytest.approx(expected_kl + expected_rev)
    assert _val(tvd(a, b)) == pytest.approx(0.25)
    assert _val(chebyshev(a, b)) == pytest.approx(0.25)
    m = np.array([0.375, 0.625])
    expected_js = 0.5 * float(np.sum([0.5, 0.5] * np.log(np.array([0.5, 0.5]) / m))) + 0.5 * float(
        np.sum([0.25, 0.75] * np.log(np.array([0.25, 0.75]) / m))
    )
    assert _val(js(a, b)) == pytest.approx(expected_js)


def test_kl_matches_scipy() -> None:
    from scipy.special import rel_entr

    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(5), size=7)
    q = rng.dirichlet(np.ones(5), size=7)
    pa = xr.DataArray(p, dims=[QUERY, OUTCOME])
    qa = xr.DataArray(q, dims=[QUERY, OUTCOME])
    np.testing.assert_allclose(kl(pa, qa).values, rel_entr(p, q).sum(-1), rtol=1e-12)


def test_reduces_only_named_dim() -> None:
    rng = np.random.default_rng(1)
    p = xr.DataArray(rng.dirichlet(np.ones(3), size=4).T, dims=[OUTCOME, QUERY])
    q = xr.DataArray(rng.dirichlet(np.ones(3), size=4), dims=[QUERY, OUTCOME])
    for name, fn in ALL.items():
        out = fn(p, q, dim=OUTCOME)
        assert out.dims == (QUERY,), name
        for i in range(4):
            single = fn(p.isel(query=i), q.isel(query=i), dim=OUTCOME)
            assert float(out[i]) == pytest.approx(_val(single)), name


def test_missing_dim_raises() -> None:
    p = xr.DataArray([0.5, 0.5], dims=[OUTCOME])
    for fn in ALL.values():
        with pytest.raises(ValueError):
            fn(p, p, dim="option")


@pytest.mark.parametrize("name", list(ALL))
def test_nan_oracle_propagates(name: str) -> None:
    """A read-out without an oracle (NaN row) yields NaN, others are unaffected."""
    fn = ALL[name]
    p = xr.DataArray([[0.2, 0.8], [0.6, 0.4]], dims=[QUERY, OUTCOME])
    oracle = xr.DataArray([[np.nan, np.nan], [0.5, 0.5]], dims=[QUERY, OUTCOME])
    for out in (fn(oracle, p), fn(p, oracle)):
        assert np.isnan(out.values[0])
        assert np.isfinite(out.values[1])
    # A single NaN entry poisons the whole row too.
    partial = xr.DataArray([[0.0, np.nan], [0.5, 0.5]], dims=[QUERY, OUTCOME])
    assert np.isnan(fn(partial, p).values[0])
    assert np.isnan(fn(p, partial).values[0])


def test_mae() -> None:
    x = xr.DataArray([0.1, 0.5, np.nan], dims=[QUERY])
    y = xr.DataArray([0.2, 0.1, 0.3], dims=[QUERY])
    assert _val(mae(x, y)) == pytest.approx((0.1 + 0.4) / 2)
    assert _val(mae(x, y, dim=QUERY)) == pytest.approx((0.1 + 0.4) / 2)
    assert _val(mae(x, y)) == pytest.approx(_val(mae(y, x)))
    everything_missing = xr.DataArray([np.nan, np.nan], dims=[QUERY])
    assert np.isnan(_val(mae(everything_missing, y.isel(query=slice(0, 2)))))
