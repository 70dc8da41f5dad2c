"""Recommender analysis: aggregate type-conditional ratings and score against the oracle.

Inputs are debiased beliefs as xarray objects. The type belief has a type
dimension (``type_dim``, e.g. the type probe's ``outcome`` renamed to ``type``),
the type-conditional ratings have both ``type_dim`` and the rating ``dim``
(stack the probes ``rating|type=k`` along ``type_dim`` in k order).

From a cache file: :func:`recommender_scores` per (delivery, episode, turn), then
:func:`score_table` (mean ± SEM over episodes) and :func:`after_evidence`.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.divergence import tvd
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, OUTCOME, TURN
from belieflens.errors import CacheFileError
from belieflens.types import DebiasMethod

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


TYPE_DIM = "type"
"""The user-type dimension of the type belief and the type-conditional ratings."""

TVD_METRICS: tuple[str, ...] = ("tvd_z", "tvd_y", "tvd_y_argmax", "tvd_y_marginal")
"""TVD scores, in table order."""

MAE_METRICS: tuple[str, ...] = ("mae_y", "mae_y_argmax", "mae_y_marginal", "mae_y_true")
"""MAE scores (in stars), in table order."""


def _probe(b: xr.Dataset, name: str, var: str) -> xr.DataArray:
    k = int((b["outcome_label"].sel(probe=name) != "").sum())
    return b[var].sel(probe=name, drop=True).isel({OUTCOME: slice(0, k)})


def recommender_scores(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Per (delivery, episode, turn) scores of a recommender cache file.

    - ``tvd_z``: TVD of the model's type belief (``type`` probe) from the exact
      posterior over types;
    - ``tvd_y``, ``mae_y``: TVD and |E[stars] difference| of the model's direct
      rating belief for the target movie (``rating`` probe) from the posterior
      predictive;
    - the type-conditional ratings (``rating|type=k`` probes) aggregated two ways:
      at the model's most likely type (``*_argmax``) and marginalised over its type
      belief (``*_marginal``), each scored with TVD and MAE against the posterior
      predictive;
    - ``mae_y_true``: |E[stars] − the user's actual rating of the target| (from
      ``truth_target_rating``), for reference.
    """
    b = output_beliefs(ds, method=method)
    probes = {str(p) for p in b["probe"].values}
    for need in ("type", "rating"):
        if need not in probes:
            raise CacheFileError(f"recommender cache file lacks the {need!r} probe")
    p_type = _probe(b, "type", "belief").rename({OUTCOME: TYPE_DIM})
    o_type = _probe(b, "type", "oracle").rename({OUTCOME: TYPE_DIM})
    p_rating = _probe(b, "rating", "belief")
    o_rating = _probe(b, "rating", "oracle")
    k = p_type.sizes[TYPE_DIM]
    cond_names = [f"rating|type={j}" for j in range(k)]
    p_cond = None
    if all(n in probes for n in cond_names):
        p_cond = xr.concat([_probe(b, n, "belief") for n in cond_names], dim=TYPE_DIM)
    out = scores(p_type, p_rating, o_type, o_rating, p_cond, type_dim=TYPE_DIM, dim=OUTCOME)
    if has_truth(ds, "target_rating"):
        actual = episode_truth(ds, "target_rating")
        out["mae_y_true"] = rating_abs_error(p_rating, actual, OUTCOME)
    return out.transpose("delivery", EPISODE, TURN)


def score_table(sc: xr.Dataset) -> xr.Dataset:
    """Mean and SEM over episodes of every score: ``<name>_mean``, ``<name>_sem`` and ``n``."""
    out: dict[str, xr.DataArray] = {}
    for name in sc.data_vars:
        m = mean_sem(sc[name], EPISODE)
        out[f"{name}_mean"] = m["mean"]
        out[f"{name}_sem"] = m["sem"]
        out["n"] = m["n"]
    return xr.Dataset(out)


def after_evidence(table: xr.Dataset) -> xr.Dataset:
    """Each score of :func:`score_table` averaged over turns ≥ 1 and every delivery (scalars,
    TVD scores first, then MAE scores)."""
    return xr.Dataset({
        n: table[f"{n}_mean"].where(table[TURN] > 0).mean(skipna=True)
        for n in (*TVD_METRICS, *MAE_METRICS)
        if f"{n}_mean" in table
    })
