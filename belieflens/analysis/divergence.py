"""Divergences between distributions held in xarray objects, reduced over a named dimension.

All use the natural log. ``kl(p, q)`` is KL(p ‖ q); when comparing to an oracle,
pass the oracle first (as in *From Prompts to Posteriors*). Where an input is NaN
(e.g. a probe without an oracle) the result is NaN, never a silent number.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

_EPS = 1e-12
_TINY = float(np.finfo(np.float64).tiny)


def _check(p: xr.DataArray, q: xr.DataArray, dim: str) -> None:
    if dim not in p.dims or dim not in q.dims:
        raise ValueError(f"dimension {dim!r} must be in both inputs (got {p.dims} and {q.dims})")


def _sum(x: xr.DataArray, dim: str) -> xr.DataArray:
    return x.sum(dim, skipna=False)


def l1(p: xr.DataArray, q: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """L1 distance: sum of absolute differences over ``dim``."""
    _check(p, q, dim)
    return _sum(abs(p - q), dim)


def tvd(p: xr.DataArray, q: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """Total variation distance: half the L1 distance, in [0, 1]."""
    return 0.5 * l1(p, q, dim)


def tvd_values(p: ArrayLike, q: ArrayLike, axis: int | None = -1) -> NDArray[np.float64]:
    """:func:`tvd` of plain arrays over ``axis`` (``None``: the sum over every axis, e.g. of
    the rows of a batch), for code that holds numpy arrays rather than DataArrays.

    Examples:
        >>> tvd_values([0.5, 0.5], [1.0, 0.0])
        array(0.5)
    """
    return np.asarray(0.5 * np.abs(np.subtract(p, q)).sum(axis=axis), dtype=np.float64)


def chebyshev(p: xr.DataArray, q: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """Chebyshev distance: the largest absolute difference over ``dim``."""
    _check(p, q, dim)
    return abs(p - q).max(dim, skipna=False)


def _kl_sum(p: xr.DataArray, q: xr.DataArray, dim: str, floor: float) -> xr.DataArray:
    """Sum over ``dim`` of p (log p - log max(q, floor)), 0 where p = 0, NaN where any input is."""
    p_pos = p > 0
    log_p = np.log(p.where(p_pos, 1.0))
    log_q = np.log(q.clip(min=floor).where(p_pos, 1.0))
    terms = (p * (log_p - log_q)).where(p_pos, 0.0)
    terms = terms.where(~(p.isnull() | q.isnull()))
    return _sum(terms, dim)


def kl(p: xr.DataArray, q: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """KL(p ‖ q) in nats; terms with p = 0 contribute 0; q is floored at 1e-12.

    The result is clipped at 0: flooring ``q`` (and rounding) could otherwise push a
    sum that is mathematically non-negative slightly below zero.
    """
    _check(p, q, dim)
    return _sum_clip(_kl_sum(p, q, dim, _EPS), 0.0, None)


def _sum_clip(x: xr.DataArray, lo: float | None, hi: float | None) -> xr.DataArray:
    return x.clip(min=lo, max=hi)  # NaN stays NaN


def sym_kl(p: xr.DataArray, q: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """Symmetric KL: KL(p ‖ q) + KL(q ‖ p)."""
    return kl(p, q, dim) + kl(q, p, dim)


def js(p: xr.DataArray, q: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """Jensen-Shannon divergence in nats, in [0, ln 2].

    No 1e-12 floor is needed: wherever p > 0 the mixture m = (p + q) / 2 is too
    (up to underflow of subnormals, guarded by the smallest normal float).
    """
    _check(p, q, dim)
    m = 0.5 * (p + q)
    out = 0.5 * _kl_sum(p, m, dim, _TINY) + 0.5 * _kl_sum(q, m, dim, _TINY)
    return _sum_clip(out, 0.0, float(np.log(2.0)))


def mae(x: xr.DataArray, y: xr.DataArray, dim: str | None = None) -> xr.DataArray:
    """Mean absolute error of point estimates, averaged over ``dim`` (all dims if ``None``)."""
    err = abs(x - y)
    return err.mean(dim, skipna=True) if dim is not None else err.mean(skipna=True)
