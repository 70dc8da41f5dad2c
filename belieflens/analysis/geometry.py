"""Belief-state geometry: how well an affine map of the residual recovers the exact belief.

The analysis of Shai et al. (NeurIPS 2024) on a cache file of a token-level environment
(``belief_state[query, state]``, the next-token ``oracle``, or any :class:`Target` a process
defines): an affine ridge regression from the residual at every read-out to the belief, per
layer and on all layers concatenated, scored on held-out whole sequences (folds grouped by
episode). Sampled sequences are drawn from the process, so the plain mean over held-out rows
estimates the probability-weighted one.

The regression is the decoders' estimator
(:func:`~belieflens.analysis.decoders.estimator.ridge_heldout`): standardised features, the
penalty chosen by nested cross-validation inside each outer fold's training episodes and
reported per fold (``lam``). Three comparisons sit beside it:

- the **permutation null**: the same regression, its penalty chosen the same way, onto
  :data:`~belieflens.analysis.decoders.estimator.NULL_PERMUTATIONS` targets whose whole
  belief trajectories are permuted between episodes; ``r2_shuffled`` is their mean (near or
  below 0 when the regression finds nothing real) and ``p_value`` the permutation p-value;
- **recent-token baselines**: a linear map of one-hots of the last ``k`` tokens (with the
  position) and a lookup table of the last ``k`` tokens (the mean training belief of each
  ``k``-gram), for each ``k`` of ``lags``; where the belief is nearly a function of the last
  few tokens (Mess3), they show what the residual adds;
- the model's own **next-token** distribution as the regressor: where beliefs are not a
  function of the next-token prediction (RRXOR), it falls short of the residual.

Examples:
    >>> ds = belieflens.open_cache("mess3.h5")
    >>> g = ds.bl.geometry(n_folds=2)
    >>> g["r2"].dims, g["r2_linear_last"].dims
    (('layer',), ('lag',))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.decoders.estimator import (
    NULL_PERMUTATIONS,
    RidgeHeldOut,
    null_targets,
    ridge_heldout,
    ridge_heldout_many,
)
from belieflens.analysis.decoders.folds import fold_split, group_folds
from belieflens.analysis.decoders.ridge import DEFAULT_LAMBDAS
from belieflens.dims import EPISODE, LAG, LAYER, QUERY, STATE, TURN
from belieflens.errors import ParameterError

F64 = NDArray[np.float64]

DEFAULT_LAGS: tuple[int, ...] = (1, 2, 3, 4)
"""The ``k`` of the recent-token baselines by default (the last 1 to 4 tokens)."""

FOLD = "fold"
PERMUTATION = "permutation"


@dataclass(frozen=True, eq=False)
class Target:
    """The regression target of a file: ``y[query, state]`` and what it is."""

    values: F64
    labels: tuple[str, ...]
    name: str


def target_of(ds: xr.Dataset, target: str | Target = "belief_state") -> Target:
    """``belief_state`` (the hidden-state belief) or ``oracle`` (the next-token distribution)
    of a token-level file, as a float array (a :class:`Target` is itself); anything else is
    one line."""
    if isinstance(target, Target):
        if target.values.shape[0] != ds.sizes[QUERY]:
            raise ParameterError(f"target {target.name!r} has {target.values.shape[0]} rows, "
                                 f"the file {ds.sizes[QUERY]} read-outs")
        return target
    if target == "belief_state":
        if "belief_state" not in ds.variables:
            raise ParameterError("this file has no belief_state: extract a token-level "
                                 "environment (a token process, which stores its belief)")
        return Target(np.asarray(ds["belief_state"].values, dtype=np.float64),
                      tuple(str(s) for s in np.asarray(ds["state_label"].values)), target)
    if target == "oracle":
        labels = [str(s) for s in np.asarray(ds["outcome_label"].values)[0] if str(s)]
        y = np.asarray(ds["oracle"].values, dtype=np.float64)[:, : len(labels)]
        if np.isnan(y).any():
            raise ParameterError("target 'oracle': some read-outs have no oracle")
        return Target(y, tuple(labels), target)
    raise ParameterError(f"target = {target!r} is not allowed: belief_state or oracle")


def scores(y: F64, pred: F64) -> tuple[float, float]:
    """``(R², MSE)`` over every row and coordinate: R² = 1 − SSE / SST about the mean."""
    sse = float(((y - pred) ** 2).sum())
    sst = float(((y - y.mean(axis=0)) ** 2).sum())
    return (1.0 - sse / sst if sst > 0 else float("nan")), sse / y.size


def last_tokens(ds: xr.Dataset, k: int) -> NDArray[np.int64]:
    """The last ``k`` tokens seen at each read-out, ``[query, k]`` (most recent last; -1
    before the sequence starts), from ``input_ids`` (position 0 is the BOS)."""
    ids = np.asarray(ds["input_ids"].values, dtype=np.int64)
    pos = np.asarray(ds["answer_pos"].values, dtype=np.int64)
    out = np.full((ids.shape[0], k), -1, dtype=np.int64)
    for j in range(k):
        at = pos - (k - 1 - j)
        ok = at >= 1
        out[ok, j] = ids[np.flatnonzero(ok), at[ok]]
    return out


def one_hot(codes: NDArray[np.int64]) -> F64:
    """One-hot columns of each column of ``codes`` (its distinct values), side by side."""
    cols = []
    for j in range(codes.shape[1]):
        _, inv = np.unique(codes[:, j], return_inverse=True)
        cols.append(np.eye(int(inv.max()) + 1)[inv])
    return np.concatenate(cols, axis=1) if cols else np.zeros((codes.shape[0], 0))


def lookup_heldout(codes: NDArray[np.int64], y: F64, folds: NDArray[np.int64]) -> F64:
    """Held-out lookup-table predictions: the mean training ``y`` of each row's ``k``-gram
    (``codes``), the training mean where the fold's training rows never saw it."""
    _, key = np.unique(codes, axis=0, return_inverse=True)
    key = key.ravel()
    pred = np.empty_like(y)
    for f in range(int(folds.max()) + 1):
        train, test = fold_split(folds, f)
        n = np.bincount(key[train], minlength=key.max() + 1).astype(np.float64)
        sums = np.stack([np.bincount(key[train], weights=y[train, c], minlength=key.max() + 1)
                         for c in range(y.shape[1])], axis=1)
        mean = np.where(n[:, None] > 0, sums / np.maximum(n, 1)[:, None], y[train].mean(axis=0))
        pred[test] = mean[key[test]]
    return pred


def next_token_features(ds: xr.Dataset) -> F64:
    """The model's own next-token distribution over the options (renormalised), per read-out."""
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)
    lp = np.where(np.isnan(lp), -np.inf, lp)
    p = np.exp(lp - lp.max(axis=1, keepdims=True))
    out: F64 = p / p.sum(axis=1, keepdims=True)
    return out


@dataclass(frozen=True, eq=False)
class GeometryFits:
    """The held-out fits of one target: per layer and on all layers concatenated."""

    target: Target
    layers: tuple[RidgeHeldOut, ...]
    concat: RidgeHeldOut
    folds: NDArray[np.int64]


def residuals(ds: xr.Dataset) -> F64:
    """``resid [query, layer, d_model]`` as float64."""
    return np.asarray(ds["resid"].values, dtype=np.float64)


def geometry_fits(
    ds: xr.Dataset,
    rng: np.random.Generator,
    *,
    target: str | Target = "belief_state",
    n_folds: int = 5,
    permutations: int = NULL_PERMUTATIONS,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    resid: F64 | None = None,
) -> GeometryFits:
    """The nested-CV ridge fits of ``target`` from each layer's residual and from all layers
    concatenated, with ``permutations`` permuted-trajectory nulls each. ``rng`` draws the
    folds (whole episodes) and then the nulls, so two files of one study (a model and its
    untrained control) get the same folds and nulls from the same seed."""
    return geometry_fits_many(ds, rng, targets=[target], n_folds=n_folds,
                              permutations=permutations, lambdas=lambdas, resid=resid)[0]


def geometry_fits_many(
    ds: xr.Dataset,
    rng: np.random.Generator,
    *,
    targets: Sequence[str | Target],
    n_folds: int = 5,
    permutations: int = NULL_PERMUTATIONS,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    resid: F64 | None = None,
) -> list[GeometryFits]:
    """:func:`geometry_fits` of several targets on the same folds, sharing each layer's
    decompositions (each target's nulls drawn from ``rng`` in turn)."""
    tgts = [target_of(ds, t) for t in targets]
    episodes = np.asarray(ds[EPISODE].values)
    folds = group_folds(episodes, n_folds, rng)
    pairs = [(t.values, null_targets(t.values, episodes, rng, permutations)) for t in tgts]
    x = residuals(ds) if resid is None else resid
    per_layer = [ridge_heldout_many(x[:, layer], pairs, folds, lambdas=lambdas)
                 for layer in range(x.shape[1])]
    concat = ridge_heldout_many(x.reshape(x.shape[0], -1), pairs, folds, lambdas=lambdas)
    return [GeometryFits(t, tuple(fits[i] for fits in per_layer), concat[i], folds)
            for i, t in enumerate(tgts)]


def _baselines(ds: xr.Dataset, y: F64, folds: NDArray[np.int64], lags: Sequence[int],
               lambdas: Sequence[float]) -> tuple[list[float], list[float], RidgeHeldOut]:
    """R² of the recent-token baselines (linear with the position, lookup) per lag, and the
    fit from the model's own next-token distribution."""
    turn = np.asarray(ds[TURN].values, dtype=np.float64)[:, None]
    lin, look = [], []
    for k in lags:
        codes = last_tokens(ds, int(k))
        feats = np.concatenate([one_hot(codes), turn], axis=1)
        lin.append(ridge_heldout(feats, y, folds, lambdas=lambdas).r2)
        look.append(scores(y, lookup_heldout(codes, y, folds))[0])
    return lin, look, ridge_heldout(next_token_features(ds), y, folds, lambdas=lambdas)


def geometry(
    ds: xr.Dataset,
    rng: np.random.Generator,
    *,
    target: str | Target = "belief_state",
    n_folds: int = 5,
    lags: Sequence[int] = DEFAULT_LAGS,
    permutations: int = NULL_PERMUTATIONS,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
) -> xr.Dataset:
    """Held-out R² and MSE of the belief from the residual (per layer and concatenated), the
    permutation null, the recent-token baselines and the next-token regressor (module doc).

    Args:
        ds: a cache file of a token-level environment.
        rng: seeds the folds (whole episodes), then the permutations.
        target: ``belief_state``, ``oracle`` (for ``coin-tokens``, the posterior mean) or a
            :class:`Target` (e.g. one of :func:`belieflens.envs.tokens.metrics.targets`).
        n_folds: held-out folds of whole episodes (3 or more: λ is chosen inside each).
        lags: the ``k`` of the recent-token baselines.
        permutations: permuted-trajectory targets behind the null (0: none).
        lambdas: the penalties searched (standardised features).

    Returns:
        A Dataset: ``r2``, ``mse``, ``r2_shuffled`` (the nulls' mean), ``p_value`` over
        ``layer``; ``lam (layer, fold)``, ``r2_null (layer, permutation)``;
        ``r2_linear_last``, ``r2_lookup_last`` over ``lag``; scalars ``r2_concat``,
        ``mse_concat``, ``r2_concat_shuffled``, ``p_value_concat``, ``r2_next_token``,
        ``mse_next_token``; ``lam_concat (fold)``, ``r2_concat_null (permutation)``; attrs
        ``target``, ``best_layer``, ``n_rows``, ``n_episodes``, ``n_folds``,
        ``permutations``, ``estimator``.
    """
    if any(int(k) < 1 for k in lags):
        raise ParameterError(f"lags = {list(lags)} is not allowed: integers >= 1")
    fits = geometry_fits(ds, rng, target=target, n_folds=n_folds, permutations=permutations,
                         lambdas=lambdas)
    y = fits.target.values
    lin, look, nt = _baselines(ds, y, fits.folds, lags, lambdas)
    r2 = np.array([f.r2 for f in fits.layers])
    nulls = np.array([f.null_r2 for f in fits.layers]).reshape(len(fits.layers), permutations)
    c = fits.concat
    return xr.Dataset(
        {
            "r2": ((LAYER,), r2), "mse": ((LAYER,), np.array([f.mse for f in fits.layers])),
            "r2_shuffled": ((LAYER,), nulls.mean(axis=1) if permutations else np.full(
                r2.shape, np.nan)),
            "p_value": ((LAYER,), np.array([f.p_value for f in fits.layers])),
            "lam": ((LAYER, FOLD), np.array([f.lam for f in fits.layers])),
            "r2_null": ((LAYER, PERMUTATION), nulls),
            "r2_linear_last": ((LAG,), np.array(lin)), "r2_lookup_last": ((LAG,), np.array(look)),
            "r2_concat": c.r2, "mse_concat": c.mse,
            "r2_concat_shuffled": float(c.null_r2.mean()) if permutations else np.nan,
            "p_value_concat": c.p_value, "lam_concat": ((FOLD,), c.lam),
            "r2_concat_null": ((PERMUTATION,), c.null_r2),
            "r2_next_token": nt.r2, "mse_next_token": nt.mse,
        },
        coords={LAYER: np.arange(r2.size), LAG: np.array([int(k) for k in lags])},
        attrs={"target": fits.target.name, "best_layer": int(np.nanargmax(r2)),
               "n_rows": int(y.shape[0]), "n_episodes": int(np.unique(ds[EPISODE]).size),
               "n_folds": n_folds, "permutations": permutations,
               "estimator": "ridge on standardised features, lambda by nested CV grouped by "
                            "episode (chosen inside each outer fold's training folds)"},
    )


def regressed(ds: xr.Dataset, rng: np.random.Generator, *, target: str | Target = "belief_state",
              layer: int | None = None, n_folds: int = 5,
              lambdas: Sequence[float] = DEFAULT_LAMBDAS) -> xr.DataArray:
    """Held-out regressed beliefs ``[query, state]`` from one layer's residual, or from all
    layers concatenated (``layer=None``): the points of the simplex figure (the estimator of
    :func:`geometry`)."""
    tgt = target_of(ds, target)
    resid = residuals(ds)
    if layer is not None and not 0 <= layer < resid.shape[1]:
        raise ParameterError(f"layer = {layer} is not allowed: 0..{resid.shape[1] - 1}")
    x = resid.reshape(resid.shape[0], -1) if layer is None else resid[:, layer]
    folds = group_folds(np.asarray(ds[EPISODE].values), n_folds, rng)
    pred = ridge_heldout(x, tgt.values, folds, lambdas=lambdas).pred
    return xr.DataArray(pred, dims=(QUERY, STATE), coords={STATE: list(tgt.labels)},
                        name="regressed", attrs={"layer": "concat" if layer is None else layer,
                                                 "target": tgt.name})


def cross_entropy(ds: xr.Dataset) -> xr.Dataset:
    """The model's expected cross-entropy per position against the optimal predictor's.

    At each read-out the expectation over the next token is exact: ``−Σ oracle · log p_model``
    (the model's next-token distribution over the symbols, renormalised) beside the oracle's
    entropy; both averaged over sequences per ``turn``, with their ``ratio``.
    """
    labels = [s for s in np.asarray(ds["outcome_label"].values)[0] if str(s)]
    oracle = np.asarray(ds["oracle"].values, dtype=np.float64)[:, : len(labels)]
    p = next_token_features(ds)[:, : len(labels)]
    with np.errstate(divide="ignore", invalid="ignore"):
        model = -(oracle * np.log(np.maximum(p, 1e-300))).sum(axis=1)
        optimal = -(np.where(oracle > 0, oracle * np.log(np.where(oracle > 0, oracle, 1)), 0)
                    ).sum(axis=1)
    turn = np.asarray(ds[TURN].values)
    turns = np.unique(turn)
    m = np.array([model[turn == t].mean() for t in turns])
    o = np.array([optimal[turn == t].mean() for t in turns])
    return xr.Dataset({"model": ((TURN,), m), "optimal": ((TURN,), o),
                       "ratio": ((TURN,), m / np.where(o > 0, o, np.nan))},
                      coords={TURN: turns})
