"""Tests for ``belieflens.analysis.stats``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import xarray as xr
from scipy import stats as sps

from belieflens.analysis.stats import (
    accuracy_difference,
    binomial_test,
    bootstrap_ci,
    mcnemar_test,
    mean_sem,
    paired_comparison,
    sem,
    significance_mark,
    significance_marks,
)
from belieflens.dims import EPISODE, TURN


def _panel(rng: np.random.Generator, n_ep: int = 40, n_turn: int = 3) -> xr.DataArray:
    return xr.DataArray(
        rng.normal(size=(n_ep, n_turn)),
        dims=[EPISODE, TURN],
        coords={EPISODE: np.arange(n_ep), TURN: np.arange(n_turn)},
    )


def test_sem_matches_scipy_and_skips_nan() -> None:
    x = _panel(np.random.default_rng(0))
    x[3, 0] = np.nan
    x[7, 0] = np.nan
    out = sem(x, EPISODE)
    assert out.dims == (TURN,)
    assert float(out[0]) == pytest.approx(sps.sem(x.values[:, 0], nan_policy="omit"))
    assert float(out[1]) == pytest.approx(sps.sem(x.values[:, 1]))
    ms = mean_sem(x, EPISODE)
    assert isinstance(ms, xr.Dataset) and set(ms.data_vars) == {"mean", "sem", "n"}
    assert all(ms[v].dims == (TURN,) for v in ms.data_vars)
    assert int(ms["n"][0]) == 38 and int(ms["n"][1]) == 40
    xr.testing.assert_identical(ms["sem"], out.rename("sem"))
    xr.testing.assert_identical(ms["mean"], x.mean(EPISODE, skipna=True).rename("mean"))


def test_mean_sem_edge_cases() -> None:
    """n == 1 and n == 0 give NaN SEM (ddof=1), as does a dimension of size 0 or 1."""
    x = xr.DataArray(
        [[1.0, 2.0, 3.0, np.nan], [np.nan, np.nan, 4.0, np.nan], [np.nan] * 4],
        dims=[TURN, "case"],
    )
    ms = mean_sem(x, "case")
    assert ms["n"].values.tolist() == [3, 1, 0]
    np.testing.assert_allclose(ms["mean"].values[:2], [2.0, 4.0])
    assert float(ms["sem"][0]) == pytest.approx(1.0 / np.sqrt(3))
    assert np.isnan(ms["mean"].values[2]) and np.isnan(ms["sem"].values[1:]).all()
    for size in (0, 1):
        one = mean_sem(xr.DataArray(np.ones((2, size)), dims=[TURN, EPISODE]), EPISODE)
        assert np.isnan(one["sem"].values).all() and one["n"].values.tolist() == [size, size]


def test_sem_nan_with_fewer_than_two() -> None:
    x = xr.DataArray([[1.0, np.nan], [np.nan, np.nan], [2.0, 3.0]], dims=[TURN, EPISODE])
    out = sem(x, EPISODE)
    assert np.isnan(out.values[:2]).all()
    assert float(out[2]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mean_sem(x, "layer")


def test_bootstrap_seeded_and_covers_mean() -> None:
    x = _panel(np.random.default_rng(1), n_ep=60)
    a = bootstrap_ci(x, EPISODE, np.random.default_rng(5), n_resamples=500)
    b = bootstrap_ci(x, EPISODE, np.random.default_rng(5), n_resamples=500)
    c = bootstrap_ci(x, EPISODE, np.random.default_rng(6), n_resamples=500)
    np.testing.assert_array_equal(a.low.values, b.low.values)
    assert not np.array_equal(a.low.values, c.low.values)
    assert a.low.dims == (TURN,)
    assert np.all(a.low < a.estimate) and np.all(a.estimate < a.high)
    # The 95% percentile interval of a mean is close to mean +- 1.96 SEM.
    width = (a.high - a.low).values
    np.testing.assert_allclose(width, 2 * 1.96 * sem(x, EPISODE).values, rtol=0.2)
    assert set(a.to_dataset().data_vars) == {"estimate", "low", "high"}


def test_bootstrap_nan_and_median() -> None:
    x = xr.DataArray([1.0, 2.0, np.nan, 3.0, 4.0, 100.0], dims=[EPISODE])
    ci = bootstrap_ci(x, EPISODE, np.random.default_rng(0), n_resamples=300, statistic="median")
    assert float(ci.estimate) == 3.0
    assert np.isfinite(float(ci.low)) and float(ci.low) <= 3.0 <= float(ci.high)
    with pytest.raises(ValueError):
        bootstrap_ci(x, EPISODE, np.random.default_rng(0), confidence=1.5)


def test_bootstrap_coverage() -> None:
    """A 90% interval covers the true mean in roughly 90% of repeated experiments."""
    rng = np.random.default_rng(123)
    data = xr.DataArray(rng.normal(loc=1.0, size=(200, 30)), dims=["rep", EPISODE])
    ci = bootstrap_ci(data, EPISODE, rng, n_resamples=400, confidence=0.9)
    covered = float(((ci.low <= 1.0) & (ci.high >= 1.0)).mean())
    assert 0.8 <= covered <= 0.97


def test_binomial_test() -> None:
    res = binomial_test(60, 100, 0.5)
    assert res.accuracy == 0.6
    assert res.p_value == pytest.approx(sps.binomtest(60, 100, 0.5).pvalue)
    assert res.ci_low < 0.6 < res.ci_high
    assert res.mark == ""
    strong = binomial_test(90, 100, 1 / 3)
    assert strong.p_value < 1e-6 and strong.mark == "***"
    one_sided = binomial_test(60, 100, 0.5, alternative="greater")
    assert one_sided.p_value < res.p_value
    with pytest.raises(ValueError):
        binomial_test(5, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.n = 3  # type: ignore[misc]


def test_accuracy_difference() -> None:
    res = accuracy_difference(80, 100, 50, 100)
    assert res.diff == pytest.approx(0.3)
    assert res.p_value == pytest.approx(sps.fisher_exact([[80, 20], [50, 50]]).pvalue)
    assert res.ci_low < 0.3 < res.ci_high and res.ci_low > 0
    assert res.mark == "***"
    z = accuracy_difference(80, 100, 50, 100, method="z")
    assert z.p_value < 1e-4
    same = accuracy_difference(50, 100, 50, 100)
    assert same.p_value == pytest.approx(1.0)
    assert same.ci_low < 0 < same.ci_high
    extreme = accuracy_difference(10, 10, 0, 10)
    assert -1 <= extreme.ci_low <= extreme.ci_high <= 1


def test_mcnemar() -> None:
    a = np.array([1, 1, 1, 1, 1, 1, 1, 1, 0, 0, np.nan])
    b = np.array([0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1])
    res = mcnemar_test(a, b)
    assert res.n == 10 and res.a_only == 7 and res.b_only == 0
    assert res.p_value == pytest.approx(2 * 0.5**7)
    assert mcnemar_test(a, a).p_value == 1.0


def test_paired_t_matches_scipy() -> None:
    rng = np.random.default_rng(2)
    a = _panel(rng)
    b = a - 0.3 + 0.5 * _panel(rng)
    b[0, 1] = np.nan
    res = paired_comparison(a, b, EPISODE)
    assert res.mean_diff.dims == (TURN,)
    for t in range(3):
        av, bv = a.values[:, t], b.values[:, t]
        keep = np.isfinite(av) & np.isfinite(bv)
        ref = sps.ttest_rel(av[keep], bv[keep])
        assert float(res.statistic[t]) == pytest.approx(ref.statistic)
        assert float(res.p_value[t]) == pytest.approx(ref.pvalue)
        assert int(res.n[t]) == keep.sum()
    assert list(res.marks().values) == [significance_mark(float(p)) for p in res.p_value]
    assert set(res.to_dataset().data_vars) >= {"mean_diff", "sem", "p_value"}


def test_paired_wilcoxon_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    a = _panel(rng, n_ep=25)
    b = a + 0.4 + 0.3 * _panel(rng, n_ep=25)
    res = paired_comparison(a, b, EPISODE, test="wilcoxon")
    for t in range(3):
        ref = sps.wilcoxon(a.values[:, t], b.values[:, t])
        assert float(res.p_value[t]) == pytest.approx(ref.pvalue)
        assert float(res.statistic[t]) == pytest.approx(ref.statistic)


def test_paired_degenerate() -> None:
    a = xr.DataArray([1.0, 2.0, 3.0], dims=[EPISODE])
    res = paired_comparison(a, a, EPISODE)
    assert float(res.mean_diff) == 0.0
    assert np.isnan(float(res.p_value))
    w = paired_comparison(a, a, EPISODE, test="wilcoxon")
    assert np.isnan(float(w.p_value))


def test_significance_marks() -> None:
    assert significance_mark(0.2) == ""
    assert significance_mark(0.04) == "*"
    assert significance_mark(0.009) == "**"
    assert significance_mark(0.0009) == "***"
    assert significance_mark(float("nan")) == ""
    p = xr.DataArray([0.5, 0.03, 0.005, 1e-5, np.nan], dims=[TURN])
    assert list(significance_marks(p).values) == ["", "*", "**", "***", ""]
