"""Uncertainty and significance for read-outs: SEM, bootstrap CIs, binomial and paired tests.

Everything that reduces data takes a named dimension (``dim=EPISODE``, never an
axis number) and skips NaN (a read-out without an oracle). Randomness is passed
in as a ``np.random.Generator``. Results are frozen dataclasses.

Resample the independent unit: when read-outs of one episode are correlated
(turns, rotations), first average within episode, e.g.
``x.groupby("episode").mean()``, then use ``dim="episode"``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from belieflens.dims import EPISODE

Alternative = Literal["two-sided", "less", "greater"]
"""Alternative hypothesis of a test (as in scipy)."""

PairedTest = Literal["t", "wilcoxon"]
"""Paired test: Student's paired t test, or the Wilcoxon signed-rank test."""

Statistic = Literal["mean", "median"]
"""Statistic whose sampling distribution a bootstrap estimates."""

__all__ = [
    "AccuracyDifference",
    "Alternative",
    "BinomialResult",
    "BootstrapCI",
    "McNemarResult",
    "PairedComparison",
    "PairedTest",
    "Statistic",
    "accuracy_difference",
    "binomial_test",
    "bootstrap_ci",
    "mcnemar_test",
    "mean_sem",
    "paired_comparison",
    "sem",
    "significance_mark",
    "significance_marks",
]


def _scipy_stats() -> Any:
    """:mod:`scipy.stats`, imported on first use (a second of ``import belieflens`` otherwise)."""
    from scipy import stats

    return stats


# ----------------------------------------------------------------------------- SEM


def sem(x: xr.DataArray, dim: str = EPISODE) -> xr.DataArray:
    """Standard error of the mean over ``dim``, skipping NaN: sd (ddof=1) / sqrt(n).

    NaN where fewer than two values are present.
    """
    n = x.notnull().sum(dim)
    sd = x.std(dim, ddof=1, skipna=True)
    return (sd / np.sqrt(n)).where(n >= 2)


def mean_sem_values(x: ArrayLike, axis: int = 0
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """:func:`mean_sem` of a plain array over ``axis``: mean, SEM and count of its non-NaN
    values, for code that holds numpy arrays rather than DataArrays.

    Examples:
        >>> m, s, n = mean_sem_values([[1.0, 2.0], [3.0, np.nan]])
        >>> m.tolist(), n.tolist(), bool(np.isnan(s[1]))
        ([2.0, 2.0], [2, 1], True)
    """
    a = np.moveaxis(np.asarray(x, dtype=np.float64), axis, 0)
    ms = mean_sem(xr.DataArray(a, dims=("_values", *(f"_{i}" for i in range(a.ndim - 1)))),
                  "_values")
    return (np.asarray(ms["mean"].values, dtype=np.float64),
            np.asarray(ms["sem"].values, dtype=np.float64),
            np.asarray(ms["n"].values, dtype=np.int64))


def mean_sem(x: xr.DataArray, dim: str = EPISODE) -> xr.Dataset:
    """Mean and ± 1 SEM of ``x`` over ``dim``, skipping NaN: variables ``mean``, ``sem`` and
    ``n`` (the number of non-NaN values), over the remaining named dims.

    ``sem`` is the sample SD (ddof=1) / sqrt(n), NaN where fewer than two values are present
    (see :func:`sem`).
    """
    _need_dim(x, dim)
    n = x.notnull().sum(dim)
    return xr.Dataset({"mean": x.mean(dim, skipna=True), "sem": sem(x, dim), "n": n})


# ----------------------------------------------------------------------------- bootstrap


@dataclass(frozen=True, eq=False)
class BootstrapCI:
    """A percentile bootstrap confidence interval over a dimension."""

    estimate: xr.DataArray
    """The statistic on the data itself (NaN skipped)."""
    low: xr.DataArray
    """Lower percentile bound."""
    high: xr.DataArray
    """Upper percentile bound."""
    confidence: float
    """Coverage, e.g. 0.95."""
    n_resamples: int
    """Number of bootstrap resamples."""
    statistic: Statistic
    """Which statistic was bootstrapped."""
    dim: str
    """The resampled dimension."""

    def to_dataset(self) -> xr.Dataset:
        """The bounds as one Dataset with variables ``estimate, low, high``."""
        return xr.Dataset(
            {"estimate": self.estimate, "low": self.low, "high": self.high},
            attrs={
                "confidence": self.confidence,
                "n_resamples": self.n_resamples,
                "statistic": self.statistic,
                "dim": self.dim,
            },
        )


def bootstrap_ci(
    x: xr.DataArray,
    dim: str,
    rng: np.random.Generator,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    statistic: Statistic = "mean",
    batch: int = 256,
) -> BootstrapCI:
    """Percentile bootstrap CI of ``statistic`` over ``dim``, resampling entries with replacement.

    NaN entries are skipped inside each resample (a resample made only of NaN gives
    NaN and is ignored by the percentiles). Deterministic given the state of ``rng``.
    Resamples are drawn ``batch`` at a time to bound memory.
    """
    _need_dim(x, dim)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    reduce = np.nanmedian if statistic == "median" else np.nanmean
    moved = x.transpose(..., dim)
    values = np.asarray(moved.values, dtype=np.float64)
    n = values.shape[-1]
    if n == 0:
        raise ValueError(f"dimension {dim!r} is empty")
    draws: list[NDArray[np.float64]] = []
    with np.errstate(all="ignore"), _quiet():
        done = 0
        while done < n_resamples:
            b = min(batch, n_resamples - done)
            idx = rng.integers(0, n, size=(b, n))
            draws.append(np.asarray(reduce(values[..., idx], axis=-1)))  # [..., b]
            done += b
        boot = np.concatenate(draws, axis=-1)
        alpha = (1.0 - confidence) / 2.0
        lo = np.nanquantile(boot, alpha, axis=-1)
        hi = np.nanquantile(boot, 1.0 - alpha, axis=-1)
        est = reduce(values, axis=-1)
    template = moved.isel({dim: 0}, drop=True)
    return BootstrapCI(estimate=template.copy(data=np.asarray(est)),
                       low=template.copy(data=np.asarray(lo)),
                       high=template.copy(data=np.asarray(hi)), confidence=confidence,
                       n_resamples=n_resamples, statistic=statistic, dim=dim)


# ----------------------------------------------------------------------------- accuracies


class _Significance:
    """A test result's ``mark``: the significance mark of its ``p_value``."""

    p_value: float

    @property
    def mark(self) -> str:
        """Significance mark of ``p_value`` (see :func:`significance_mark`)."""
        return significance_mark(self.p_value)


def _check_counts(successes: int, n: int) -> None:
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")


@dataclass(frozen=True)
class BinomialResult(_Significance):
    """Exact binomial test of an accuracy against a chance rate, with a Clopper-Pearson CI."""

    successes: int
    """Number of correct answers."""
    n: int
    """Number of trials."""
    accuracy: float
    """successes / n."""
    p0: float
    """Accuracy under the null hypothesis (e.g. 1 / number of options)."""
    p_value: float
    """Exact binomial p-value."""
    ci_low: float
    """Lower bound of the exact (Clopper-Pearson) CI of the accuracy."""
    ci_high: float
    """Upper bound of that CI."""
    confidence: float
    """Coverage of the CI."""
    alternative: Alternative
    """Alternative hypothesis."""


def binomial_test(
    successes: int,
    n: int,
    p0: float = 0.5,
    *,
    alternative: Alternative = "two-sided",
    confidence: float = 0.95,
) -> BinomialResult:
    """Exact binomial test (``scipy.stats.binomtest``) of ``successes`` of ``n`` against ``p0``."""
    _check_counts(successes, n)
    res = _scipy_stats().binomtest(int(successes), int(n), p=p0, alternative=alternative)
    ci = res.proportion_ci(confidence_level=confidence, method="exact")
    return BinomialResult(successes=int(successes), n=int(n), accuracy=successes / n, p0=p0,
                          p_value=float(res.pvalue), ci_low=float(ci.low), ci_high=float(ci.high),
                          confidence=confidence, alternative=alternative)


@dataclass(frozen=True)
class AccuracyDifference(_Significance):
    """Difference of two independent accuracies, acc_a − acc_b."""

    acc_a: float
    """Accuracy of the first group."""
    acc_b: float
    """Accuracy of the second group."""
    diff: float
    """acc_a − acc_b."""
    ci_low: float
    """Lower bound of the Newcombe (Wilson score) CI of the difference."""
    ci_high: float
    """Upper bound of that CI."""
    p_value: float
    """p-value of Fisher's exact test (or the pooled z test)."""
    method: Literal["fisher", "z"]
    """Test behind ``p_value``."""
    confidence: float
    """Coverage of the CI."""


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return float(centre - half), float(centre + half)


def accuracy_difference(
    k_a: int,
    n_a: int,
    k_b: int,
    n_b: int,
    *,
    method: Literal["fisher", "z"] = "fisher",
    alternative: Alternative = "two-sided",
    confidence: float = 0.95,
) -> AccuracyDifference:
    """Test whether two independent accuracies ``k_a / n_a`` and ``k_b / n_b`` differ.

    ``fisher`` (default) is Fisher's exact test on the 2 x 2 table; ``z`` the pooled
    two-proportion z test. The CI is Newcombe's hybrid score interval (method 10).
    For the same items answered twice use :func:`mcnemar_test` instead.
    """
    _check_counts(k_a, n_a)
    _check_counts(k_b, n_b)
    pa, pb = k_a / n_a, k_b / n_b
    if method == "fisher":
        table = [[k_a, n_a - k_a], [k_b, n_b - k_b]]
        p_value = float(_scipy_stats().fisher_exact(table, alternative=alternative).pvalue)
    else:
        pooled = (k_a + k_b) / (n_a + n_b)
        se = np.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
        z = (pa - pb) / se if se > 0 else 0.0
        p_value = float(_p_from_z(float(z), alternative))
    zc = float(_scipy_stats().norm.ppf(0.5 + confidence / 2))
    la, ua = _wilson(k_a, n_a, zc)
    lb, ub = _wilson(k_b, n_b, zc)
    d = pa - pb
    low = d - float(np.sqrt((pa - la) ** 2 + (ub - pb) ** 2))
    high = d + float(np.sqrt((ua - pa) ** 2 + (pb - lb) ** 2))
    return AccuracyDifference(acc_a=pa, acc_b=pb, diff=d, ci_low=low, ci_high=high, p_value=p_value,
                              method=method, confidence=confidence)


def _p_from_z(z: float, alternative: Alternative) -> float:
    return float(_tail_p(_scipy_stats().norm, z, alternative))


def _tail_p(dist: Any, stat: Any, alternative: Alternative, *args: Any) -> Any:
    """p-value of ``stat`` under the scipy distribution ``dist`` (shape ``args``): upper tail
    (``greater``), lower tail (``less``) or both."""
    if alternative == "greater":
        return dist.sf(stat, *args)
    if alternative == "less":
        return dist.cdf(stat, *args)
    return 2 * dist.sf(abs(stat), *args)


@dataclass(frozen=True)
class McNemarResult(_Significance):
    """Exact McNemar test: two read-outs of the same items, correct or not."""

    n: int
    """Number of paired items (NaN pairs dropped)."""
    acc_a: float
    """Accuracy of the first read-out."""
    acc_b: float
    """Accuracy of the second read-out."""
    a_only: int
    """Items right under a, wrong under b."""
    b_only: int
    """Items right under b, wrong under a."""
    p_value: float
    """Exact two-sided binomial p-value on the discordant pairs."""


def mcnemar_test(correct_a: ArrayLike, correct_b: ArrayLike) -> McNemarResult:
    """Exact McNemar test of paired correctness (e.g. single- vs multi-turn on the same evidence).

    Inputs are 1-d arrays of 0/1 (or booleans) aligned item by item; NaN pairs are dropped.
    """
    fa = np.asarray(correct_a, dtype=np.float64).ravel()
    fb = np.asarray(correct_b, dtype=np.float64).ravel()
    if fa.shape != fb.shape:
        raise ValueError(f"paired inputs differ in shape: {fa.shape} vs {fb.shape}")
    keep = np.isfinite(fa) & np.isfinite(fb)
    a: NDArray[np.bool_] = fa[keep] > 0.5
    b: NDArray[np.bool_] = fb[keep] > 0.5
    n = int(a.size)
    if n == 0:
        raise ValueError("no complete pairs")
    a_only = int(np.sum(a & ~b))
    b_only = int(np.sum(b & ~a))
    disc = a_only + b_only
    p = 1.0 if disc == 0 else float(_scipy_stats().binomtest(a_only, disc, 0.5).pvalue)
    return McNemarResult(n=n, acc_a=float(a.mean()), acc_b=float(b.mean()), a_only=a_only,
                         b_only=b_only, p_value=p)


# ----------------------------------------------------------------------------- paired comparison


@dataclass(frozen=True, eq=False)
class PairedComparison:
    """Paired differences a − b over a dimension: mean ± SEM and a test of zero difference."""

    mean_diff: xr.DataArray
    """Mean of a − b over complete pairs."""
    sem: xr.DataArray
    """SEM of that mean."""
    n: xr.DataArray
    """Number of complete (non-NaN) pairs."""
    statistic: xr.DataArray
    """t statistic or Wilcoxon W."""
    p_value: xr.DataArray
    """p-value of the test (NaN with too few pairs)."""
    test: PairedTest
    """Test used."""
    dim: str
    """The paired dimension."""

    def marks(self) -> xr.DataArray:
        """Significance marks of ``p_value`` (see :func:`significance_marks`)."""
        return significance_marks(self.p_value)

    def to_dataset(self) -> xr.Dataset:
        """The fields as one Dataset."""
        return xr.Dataset(
            {
                "mean_diff": self.mean_diff,
                "sem": self.sem,
                "n": self.n,
                "statistic": self.statistic,
                "p_value": self.p_value,
            },
            attrs={"test": self.test, "dim": self.dim},
        )


def _wilcoxon_1d(d: NDArray[np.float64], alternative: str) -> tuple[float, float]:
    d = d[np.isfinite(d)]
    if d.size < 1 or np.all(d == 0):
        return float("nan"), float("nan")
    with _quiet():
        res = _scipy_stats().wilcoxon(d, alternative=alternative, zero_method="wilcox")
    return float(res.statistic), float(res.pvalue)


def paired_comparison(
    a: xr.DataArray,
    b: xr.DataArray,
    dim: str = EPISODE,
    *,
    test: PairedTest = "t",
    alternative: Alternative = "two-sided",
) -> PairedComparison:
    """Compare ``a`` and ``b`` paired along ``dim`` (e.g. per-episode error, two deliveries).

    Pairs where either side is NaN are dropped (per remaining coordinate). Other
    dimensions are kept: one test per cell. ``t`` is the paired t test (NaN with
    fewer than two pairs or zero variance); ``wilcoxon`` the signed-rank test
    (zero differences dropped).
    """
    _need_dim(a, dim)
    _need_dim(b, dim)
    d = a - b
    complete = d.notnull()
    n = complete.sum(dim)
    mean = d.mean(dim, skipna=True)
    se = sem(d, dim)
    if test == "t":
        t = mean / se
        df = (n - 1).where(n >= 2)
        with np.errstate(all="ignore"):
            tv = np.asarray(t.values, dtype=np.float64)
            dfv = np.asarray(df.values, dtype=np.float64)
            pv = _tail_p(_scipy_stats().t, tv, alternative, dfv)
        statistic = t.where(np.isfinite(t))
        p_value = t.copy(data=np.where(np.isfinite(tv), pv, np.nan))
    elif test == "wilcoxon":
        statistic, p_value = xr.apply_ufunc(
            _wilcoxon_1d,
            d,
            kwargs={"alternative": alternative},
            input_core_dims=[[dim]],
            output_core_dims=[[], []],
            vectorize=True,
            output_dtypes=[np.float64, np.float64],
        )
    else:
        raise ValueError(f"test must be 't' or 'wilcoxon', got {test!r}")
    return PairedComparison(mean_diff=mean, sem=se, n=n, statistic=statistic, p_value=p_value,
                            test=test, dim=dim)


# ----------------------------------------------------------------------------- marks


def significance_mark(
    p: float, thresholds: tuple[float, float, float] = (0.05, 0.01, 0.001)
) -> str:
    """``***`` if p < 0.001, ``**`` if p < 0.01, ``*`` if p < 0.05, else ``""`` (also for NaN)."""
    if not np.isfinite(p):
        return ""
    one, two, three = thresholds
    if p < three:
        return "***"
    if p < two:
        return "**"
    if p < one:
        return "*"
    return ""


def significance_marks(p: xr.DataArray) -> xr.DataArray:
    """Elementwise :func:`significance_mark` of a DataArray of p-values (dtype ``str``)."""
    marks = np.vectorize(significance_mark, otypes=[object])(np.asarray(p.values, dtype=np.float64))
    return p.copy(data=np.asarray(marks, dtype=str))


# ----------------------------------------------------------------------------- helpers


def _need_dim(x: xr.DataArray, dim: str) -> None:
    if dim not in x.dims:
        raise ValueError(f"dimension {dim!r} not in {x.dims}")


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence 'mean of empty slice' and similar warnings from all-NaN resamples."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield
