"""Statistic baselines: every decoder result beside what a statistic of the evidence gives.

A decoder reads the oracle from a layer's residual. Where the oracle is a simple function of
what was shown (the coin flip's posterior is one of the counts of heads and flips), a
residual that merely carries that statistic (an untrained network's average of the token
embeddings does) is decoded as well. So each decoder result stands beside **statistic
baselines**: the same estimator, with the same folds, fitted on features of the evidence that
the file's environment declares
(:class:`~belieflens.episodes.capabilities.StatisticFeatures`;
``belieflens.envs.statistic_features(ds)`` rebuilds them from the file's provenance) instead
of the residual:

- for the decoders of the oracle (:func:`~belieflens.analysis.summary.decoder_tvd`), the
  held-out TVD to the oracle of each baseline (:func:`baseline_tvd`), fitted per probe
  question on the decoders' own tasks and folds
  (:func:`~belieflens.analysis.summary.decoder_tasks` with the same seed);
- for a belief-geometry target, each baseline's held-out R² on the geometry's folds
  (:func:`baseline_fits`).

A decoder's **selectivity against the baselines** is how far it is beyond the best of them
(TVD: best baseline − decoder; R²: decoder − best baseline; positive = the residual gives
more than any declared statistic). Beside untrained controls
(:func:`~belieflens.analysis.floor.floor`) it is reported against the larger of the floor
and the best baseline.

Examples:
    Not run here (``statistic_features`` rebuilds the study's episodes):

    >>> stats = belieflens.envs.statistic_features(ds)                # doctest: +SKIP
    >>> ds.bl.baselines(stats)["tvd_mean"].dims                       # doctest: +SKIP
    ('delivery', 'probe', 'turn', 'baseline')
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.decoders.estimator import RidgeHeldOut, ridge_heldout
from belieflens.analysis.decoders.heldout import heldout_distribution
from belieflens.analysis.decoders.softmax import FIT_BLAS_LIMIT
from belieflens.analysis.divergence import tvd_values
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.summary import DECODER_FOLDS, decoder_tasks, rotation_mean
from belieflens.dims import BASELINE, EPISODE, QUERY
from belieflens.errors import ParameterError

F64 = NDArray[np.float64]

Statistics = Mapping[str, NDArray[np.floating]]
"""Each statistic baseline's features of every read-out of a file, by name, ``[query,
feature]`` (``belieflens.envs.statistic_features(ds)``)."""


def check_statistics(ds: xr.Dataset, statistics: Statistics) -> None:
    """One line (:class:`ParameterError`) unless every feature set has a row per read-out."""
    for name, x in statistics.items():
        if np.ndim(x) != 2 or np.shape(x)[0] != ds.sizes[QUERY]:
            raise ParameterError(f"statistic baseline {name!r} has shape {np.shape(x)}, not "
                                 f"[query, feature] with {ds.sizes[QUERY]} read-outs")


def baseline_rows(ds: xr.Dataset, statistics: Statistics, rng: np.random.Generator, *,
                  n_folds: int = DECODER_FOLDS) -> xr.DataArray:
    """Held-out TVD to the oracle of each baseline at each read-out, dims ``(query,
    baseline)``: fitted like the decoders (the tasks and folds of :func:`decoder_tasks` from
    ``rng``: the same seed gives the decoders' folds), NaN where the decoders have none."""
    check_statistics(ds, statistics)
    names = list(statistics)
    out = np.full((ds.sizes[QUERY], len(names)), np.nan)
    tasks = decoder_tasks(ds, rng, n_folds=n_folds)
    with FIT_BLAS_LIMIT:
        for rows, y, folds in tasks:
            y_n = y / y.sum(axis=1, keepdims=True)
            for j, name in enumerate(names):
                x = np.asarray(statistics[name], dtype=np.float64)
                pred = heldout_distribution(x, y, folds, rows=rows)
                out[rows, j] = tvd_values(pred, y_n, axis=1)
    return xr.DataArray(out, dims=(QUERY, BASELINE), coords={BASELINE: names},
                        name="baseline_tvd")


def baseline_tvd(ds: xr.Dataset, statistics: Statistics, rng: np.random.Generator, *,
                 n_folds: int = DECODER_FOLDS) -> xr.DataArray:
    """:func:`baseline_rows` per probe instance, dims ``(delivery, probe, episode, turn,
    baseline)``: each instance's mean over its rotations, as the decoders' TVD."""
    rows = baseline_rows(ds, statistics, rng, n_folds=n_folds)
    out = rotation_mean(ds, rows.values, BASELINE)
    return out.assign_coords({BASELINE: rows[BASELINE].values})


def baseline_fits(statistics: Statistics, y: F64, folds: NDArray[np.int64]
                  ) -> dict[str, RidgeHeldOut]:
    """Each baseline's nested-CV ridge fit of a geometry target ``y [query, t]`` on the
    geometry's ``folds``."""
    return {name: ridge_heldout(np.asarray(x, dtype=np.float64), y, folds)
            for name, x in statistics.items()}


def best_baseline(values: xr.DataArray, *, higher_is_better: bool) -> str:
    """The name of the best baseline of ``values`` over ``baseline`` (each one number)."""
    v = np.asarray(values.values, dtype=np.float64)
    if not np.isfinite(v).any():
        return ""
    at = int(np.nanargmax(v) if higher_is_better else np.nanargmin(v))
    return str(values[BASELINE].values[at])


def baselines(ds: xr.Dataset, statistics: Statistics, *, seed: int = 0,
              n_folds: int = DECODER_FOLDS, decoder: xr.DataArray | None = None
              ) -> xr.Dataset:
    """Each statistic baseline's TVD to the oracle beside the decoders.

    Variables: ``tvd_mean`` and ``tvd_sem`` over episodes, dims ``(delivery, probe, turn,
    baseline)``; with ``decoder`` (:func:`~belieflens.analysis.summary.decoder_tvd` of the
    same file and seed, dims ``(delivery, probe, episode, turn, layer)``) also
    ``decoder_tvd (delivery, probe, layer)`` and ``selectivity (delivery, probe, layer)``:
    the best baseline's TVD minus the decoder's (means over turns and episodes; positive =
    the decoder reads more than any declared statistic), and ``best (delivery, probe)``,
    the best baseline's name. Folds from ``np.random.default_rng(seed)``: the decoders'."""
    b = baseline_tvd(ds, statistics, np.random.default_rng(seed), n_folds=n_folds)
    stats = mean_sem(b, EPISODE)
    out = xr.Dataset({"tvd_mean": stats["mean"], "tvd_sem": stats["sem"]})
    out["tvd_mean"].attrs["description"] = "held-out TVD to the oracle, mean over episodes"
    if decoder is not None:
        dec = decoder.where(b.isel({BASELINE: 0}, drop=True).notnull()).mean(
            [EPISODE, "turn"], skipna=True)
        per = b.mean([EPISODE, "turn"], skipna=True)
        best = per.min(BASELINE, skipna=True)
        out["decoder_tvd"] = dec
        out["selectivity"] = best - dec
        names = np.asarray(per[BASELINE].values).astype(str)
        at = per.fillna(np.inf).argmin(BASELINE)
        out["best"] = xr.DataArray(np.where(per.notnull().any(BASELINE), names[at.values], ""),
                                   dims=at.dims, coords=at.coords)
        out["selectivity"].attrs["description"] = (
            "best statistic baseline's TVD minus the decoder's, positive = beyond every "
            "baseline")
    out.attrs.update({"baselines": list(statistics), "seed": seed, "n_folds": n_folds,
                      "estimator": "the decoders': nested-CV ridge on the features, "
                                   "projected onto the simplex, on the decoders' folds"})
    return out
