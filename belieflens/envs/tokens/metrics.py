"""Metrics of a token-level cache file, as xarray objects: the output's agreement with the
oracle, the belief-state geometry for every target the process defines (:func:`targets`), and
the held-out regressed beliefs the simplex figure draws.

The geometry is reported for every target the process defines: for ``coin-tokens`` the
posterior mean (the next-flip oracle), the full posterior over the bias's bins
(``belief_state``) and the posterior variance, with the last 8 flips among the recent-token
baselines; for the hidden Markov processes the full belief over the hidden states. The
posterior mean is what an untrained network of the same shape already reads (near-uniform
attention averages the flips): :data:`FIGURE_TARGET` names, per process, the target the
figure shows, one an untrained network does not give.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import xarray as xr

from belieflens.analysis.compare import updating_slope
from belieflens.analysis.divergence import tvd_values
from belieflens.analysis.geometry import (
    DEFAULT_LAGS,
    Target,
    geometry,
    next_token_features,
    regressed,
    target_of,
)
from belieflens.dims import EPISODE, QUERY, TURN
from belieflens.envs.tokens.coin import CoinTokens

COIN = CoinTokens.name
"""The one token-level environment whose target is the next-token oracle (posterior mean)."""

BELIEF = "belief"
"""The full belief vector over the hidden states (every token-level process)."""

POSTERIOR_MEAN, POSTERIOR_BINS, POSTERIOR_VARIANCE = (
    "posterior mean", "posterior over bins", "posterior variance")
"""The coin's targets."""

FIGURE_TARGET: dict[str, str] = {COIN: POSTERIOR_BINS}
"""The target of the simplex figure per environment (default: :data:`BELIEF`)."""


def _coin_params(ds: xr.Dataset) -> tuple[float, float]:
    raw = ds.attrs.get("env_params", "{}")
    params = json.loads(str(raw)) if not isinstance(raw, dict) else raw
    return float(params.get("a", 1.0)), float(params.get("b", 1.0))


def targets(ds: xr.Dataset) -> dict[str, Target]:
    """Every regression target this file's process defines, by name: for ``coin-tokens`` the
    posterior mean (``oracle``: P(heads), P(tails)), the posterior over the bias's bins
    (``belief_state``) and the posterior variance (exact: the Beta posterior's
    ``m(1 - m) / (a + b + n + 1)`` after ``n`` flips with mean ``m``); for the others the
    belief over the hidden states (``belief_state``)."""
    if str(ds.attrs.get("env_name", "")) != COIN:
        return {BELIEF: target_of(ds, "belief_state")}
    mean = target_of(ds, "oracle")
    a, b = _coin_params(ds)
    m = mean.values[:, 0]
    n = np.asarray(ds[TURN].values, dtype=np.float64)
    var = (m * (1.0 - m) / (a + b + n + 1.0))[:, None]
    return {POSTERIOR_MEAN: Target(mean.values, mean.labels, POSTERIOR_MEAN),
            POSTERIOR_BINS: dataclasses.replace(target_of(ds, "belief_state"),
                                                name=POSTERIOR_BINS),
            POSTERIOR_VARIANCE: Target(var, ("variance",), POSTERIOR_VARIANCE)}


def lags(ds: xr.Dataset) -> tuple[int, ...]:
    """The recent-token baselines' lags for this file's environment (8 too for the coin)."""
    return (*DEFAULT_LAGS, 8) if str(ds.attrs.get("env_name", "")) == COIN else DEFAULT_LAGS


def figure_target(ds: xr.Dataset) -> Target:
    """The target the simplex figure shows for this file's process (:data:`FIGURE_TARGET`)."""
    return targets(ds)[FIGURE_TARGET.get(str(ds.attrs.get("env_name", "")), BELIEF)]


def geometries(ds: xr.Dataset, *, seed: int = 0) -> xr.DataTree:
    """:func:`~belieflens.analysis.geometry.geometry` of every target of :func:`targets`, one
    node per target name (in its order), each fitted from ``np.random.default_rng(seed)``."""
    return xr.DataTree.from_dict({
        name: geometry(ds, np.random.default_rng(seed), target=t, lags=lags(ds))
        for name, t in targets(ds).items()})


def output_agreement(ds: xr.Dataset) -> xr.Dataset:
    """The output's next-token distribution against the oracle: mean TVD over every read-out
    (``tvd_mean``), and the updating slope of the first symbol's probability (the coin's
    P(heads)) on the oracle's, with its episode-clustered SE (``slope``, ``slope_se``;
    :func:`~belieflens.analysis.compare.updating_slope`)."""
    k = len([s for s in np.asarray(ds["outcome_label"].values)[0] if str(s)])
    model = next_token_features(ds)[:, :k]
    oracle = np.asarray(ds["oracle"].values, dtype=np.float64)[:, :k]
    tvd = tvd_values(model, oracle, axis=1)
    ep, turn = np.asarray(ds[EPISODE].values), np.asarray(ds[TURN].values)
    eps, turns = np.unique(ep), np.unique(turn)
    grid_m = np.full((eps.size, turns.size), np.nan)
    grid_o = np.full_like(grid_m, np.nan)
    grid_m[np.searchsorted(eps, ep), np.searchsorted(turns, turn)] = model[:, 0]
    grid_o[np.searchsorted(eps, ep), np.searchsorted(turns, turn)] = oracle[:, 0]
    slope, se, n = updating_slope(grid_m, grid_o)
    return xr.Dataset({"tvd_mean": float(tvd.mean()), "slope": slope, "slope_se": se,
                       "steps": n})


def simplex_points(ds: xr.Dataset, *, target: str | Target, seed: int = 0) -> xr.Dataset:
    """The true beliefs (``true``) beside the held-out regressed ones from all layers
    concatenated (``fitted``), dims ``(query, state)``, and each read-out's ``turn``."""
    tgt = target_of(ds, target)
    pred = regressed(ds, np.random.default_rng(seed), target=tgt)
    true = tgt.values[:, : pred.sizes["state"]]
    return xr.Dataset(
        {"true": ((QUERY, "state"), true), "fitted": pred.drop_vars("state"),
         "turn": ((QUERY,), np.asarray(ds[TURN].values, dtype=np.float64))},
        attrs={"target": tgt.name})
