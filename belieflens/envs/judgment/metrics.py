"""Judgment analysis (social judgment, medical triage): no oracle, so invariance and accuracy.

Inputs are debiased label beliefs as xarray objects over an outcome dimension
(``dim``); ground truth is an outcome index. For triage the outcome index is an
ordinal urgency (0 = Emergency ... 3 = Routine), so MAE is in urgency levels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from belieflens.analysis.divergence import tvd


def predicted(p: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """The most likely outcome index (ties: the first), NaN where ``p`` has a NaN."""
    index = p.fillna(-1.0).argmax(dim).astype(np.float64)
    return index.where(p.notnull().all(dim))


def accuracy(p: xr.DataArray, truth: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """1.0 where the most likely outcome is the true one, else 0.0; NaN where ``p`` is NaN."""
    pred = predicted(p, dim)
    return (pred == truth).astype(np.float64).where(pred.notnull())


def expected_level(p: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """The expected outcome index under ``p`` (for an ordinal scale such as urgency)."""
    levels = xr.DataArray(np.arange(p.sizes[dim], dtype=np.float64), dims=[dim])
    return (p * levels).sum(dim, skipna=False)


def level_abs_error(p: xr.DataArray, truth: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """|E_p[level] - true level|: the absolute error on the ordinal scale (average it for MAE)."""
    return abs(expected_level(p, dim) - truth)


def at_argmax(
    p_given: xr.DataArray, p_condition: xr.DataArray, *, condition_dim: str = "style"
) -> xr.DataArray:
    """``p_given`` at the condition the model finds most likely (urgency at its argmax style)."""
    if condition_dim not in p_given.dims or condition_dim not in p_condition.dims:
        raise ValueError(f"both inputs need dimension {condition_dim!r}")
    return p_given.isel({condition_dim: p_condition.argmax(condition_dim)}, drop=True)


def style_spread(
    p: xr.DataArray, *, style_dim: str = "style", dim: str = "outcome"
) -> xr.DataArray:
    """Per case: mean TVD of each style's label distribution from their average (0 = invariant)."""
    centre = p.mean(style_dim)
    return tvd(p, centre, dim).mean(style_dim)


def scalar_spread(x: xr.DataArray, *, style_dim: str = "style") -> xr.DataArray:
    """Per case: the range (max - min) of a scalar score across styles."""
    return x.max(style_dim) - x.min(style_dim)


def passive_active_gap(
    passive: xr.DataArray, active: xr.DataArray, *, style_dim: str | None = "style"
) -> xr.DataArray:
    """Per case, passive minus active score; averaged over ``style_dim`` if given, else kept."""
    gap = passive - active
    if style_dim is not None and style_dim in gap.dims:
        return gap.mean(style_dim)
    return gap


def confusion(
    p: xr.DataArray, truth: xr.DataArray, labels: Sequence[str], dim: str = "outcome"
) -> xr.DataArray:
    """Counts of (true label, predicted label) over all other elements; dims ``truth, predicted``.

    Elements whose belief is NaN are left out.
    """
    k = len(labels)
    pred, true = xr.broadcast(predicted(p, dim), truth)
    pv = np.asarray(pred.values).ravel()
    tv = np.asarray(true.values).ravel()
    keep = np.isfinite(pv.astype(np.float64)) & np.isfinite(tv.astype(np.float64))
    counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(counts, (tv[keep].astype(np.int64), pv[keep].astype(np.int64)), 1)
    return xr.DataArray(
        counts,
        dims=["truth", "predicted"],
        coords={"truth": list(labels), "predicted": list(labels)},
    )
