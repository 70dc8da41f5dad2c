"""Recommender analysis: aggregate type-conditional ratings and score against the oracle.

Inputs are debiased beliefs as xarray objects. The type belief has a type
dimension (``type_dim``, e.g. the type probe's ``outcome`` renamed to ``type``),
the type-conditional ratings have both ``type_dim`` and the rating ``dim``
(stack the probes ``rating|type=k`` along ``type_dim`` in k order).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.divergence import tvd

STARS: tuple[int, ...] = (1, 2, 3, 4, 5)
"""Star value of each rating outcome, in outcome order."""


def at_argmax_type(
    p_type: xr.DataArray, p_cond: xr.DataArray, *, type_dim: str = "type"
) -> xr.DataArray:
    """The rating distribution at the model's most likely type: ``p_cond[argmax p_type]``."""
    if type_dim not in p_type.dims or type_dim not in p_cond.dims:
        raise ValueError(f"both inputs need dimension {type_dim!r}")
    best = p_type.argmax(type_dim)
    return p_cond.isel({type_dim: best}, drop=True)


def marginalised(
    p_type: xr.DataArray, p_cond: xr.DataArray, *, type_dim: str = "type"
) -> xr.DataArray:
    """The rating distribution marginalised over the model's type belief: ``sum_k p(k) p(y|k)``."""
    if type_dim not in p_type.dims or type_dim not in p_cond.dims:
        raise ValueError(f"both inputs need dimension {type_dim!r}")
    return (p_type * p_cond).sum(type_dim, skipna=False)


def expected_rating(p: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """Mean stars under a rating distribution over ``dim`` (outcome j is ``STARS[j]`` stars)."""
    if p.sizes[dim] != len(STARS):
        raise ValueError(f"a rating distribution has {len(STARS)} outcomes, got {p.sizes[dim]}")
    stars = xr.DataArray(np.asarray(STARS, dtype=np.float64), dims=[dim])
    return (p * stars).sum(dim, skipna=False)


def rating_abs_error(
    p: xr.DataArray, reference: xr.DataArray, dim: str = "outcome"
) -> xr.DataArray:
    """|E_p[stars] - reference|; ``reference`` is a distribution over ``dim`` or a star value."""
    ref = expected_rating(reference, dim) if dim in reference.dims else reference
    return abs(expected_rating(p, dim) - ref)


def scores(
    p_type: xr.DataArray,
    p_rating: xr.DataArray,
    oracle_type: xr.DataArray,
    oracle_rating: xr.DataArray,
    p_cond: xr.DataArray | None = None,
    *,
    type_dim: str = "type",
    dim: str = "outcome",
) -> xr.Dataset:
    """TVD for z and y and MAE for y, for the direct rating and (given ``p_cond``) both aggregates.

    Returns per-element scores (reduce with ``.mean(...)`` as the study needs):
    ``tvd_z``, ``tvd_y``, ``mae_y`` and, with ``p_cond``, ``tvd_y_argmax``,
    ``mae_y_argmax``, ``tvd_y_marginal``, ``mae_y_marginal``.
    """
    out = {
        "tvd_z": tvd(p_type, oracle_type, type_dim),
        "tvd_y": tvd(p_rating, oracle_rating, dim),
        "mae_y": rating_abs_error(p_rating, oracle_rating, dim),
    }
    if p_cond is not None:
        arg = at_argmax_type(p_type, p_cond, type_dim=type_dim)
        mar = marginalised(p_type, p_cond, type_dim=type_dim)
        out["tvd_y_argmax"] = tvd(arg, oracle_rating, dim)
        out["mae_y_argmax"] = rating_abs_error(arg, oracle_rating, dim)
        out["tvd_y_marginal"] = tvd(mar, oracle_rating, dim)
        out["mae_y_marginal"] = rating_abs_error(mar, oracle_rating, dim)
    return xr.Dataset(out)
