"""Per-turn and per-layer tables: divergence from the oracle, mean ± 1 SEM over episodes.

The tables are xarray Datasets; :mod:`belieflens.report.tables` prints them."""

from __future__ import annotations

import xarray as xr

from belieflens.analysis.beliefs import point_estimates
from belieflens.analysis.divergence import tvd
from belieflens.analysis.stats import mean_sem

__all__ = ["lens_table", "turn_table", "unpad"]


def unpad(x: xr.DataArray, labels: xr.DataArray) -> xr.DataArray:
    """Set outcomes past each probe's K (label ``""``) to 0 so sums over ``outcome`` ignore them.

    Missing values at real outcomes (e.g. a probe without an oracle) stay NaN.
    """
    return x.where(labels != "", 0.0)


def turn_table(beliefs: xr.Dataset) -> xr.Dataset:
    """TVD to the oracle and point-estimate error per (delivery, probe, turn), mean ± SEM.

    Variables: ``tvd_mean``, ``tvd_sem``, ``abs_err_mean``, ``abs_err_sem`` (MAE of the
    point estimate), ``estimate_mean``, ``oracle_estimate_mean``, ``n``.
    """
    labels = beliefs["outcome_label"]
    d = tvd(unpad(beliefs["oracle"], labels), unpad(beliefs["belief"], labels), dim="outcome")
    pe = point_estimates(beliefs)
    err = abs(pe["estimate"] - pe["oracle_estimate"])
    t = mean_sem(d)
    e = mean_sem(err)
    return xr.Dataset(
        {
            "tvd_mean": t["mean"],
            "tvd_sem": t["sem"],
            "abs_err_mean": e["mean"],
            "abs_err_sem": e["sem"],
            "estimate_mean": pe["estimate"].mean("episode", skipna=True),
            "estimate_sem": mean_sem(pe["estimate"])["sem"],
            "oracle_estimate_mean": pe["oracle_estimate"].mean("episode", skipna=True),
            "n": t["n"],
            "estimate_kind": pe["estimate_kind"],
        }
    )


def lens_table(lens: xr.DataArray, oracle: xr.DataArray, labels: xr.DataArray) -> xr.Dataset:
    """TVD of lens beliefs to the oracle per (delivery, probe, turn, layer), mean ± SEM."""
    d = tvd(unpad(oracle, labels), unpad(lens, labels), dim="outcome")
    t = mean_sem(d)
    return xr.Dataset({"tvd_mean": t["mean"], "tvd_sem": t["sem"], "n": t["n"]})
