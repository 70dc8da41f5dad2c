"""Belief-state geometry: how well an affine map of the residual recovers the exact belief.

The analysis of Shai et al. (NeurIPS 2024) on a cache file of a token-level environment
(``belief_state[query, state]``, or the next-token ``oracle``): an affine ridge regression from
the residual at every read-out to the belief, per layer and on all layers concatenated, scored
on held-out whole sequences (folds grouped by episode). Sampled sequences are drawn from the
process, so the plain mean over held-out rows estimates the probability-weighted one.

Three comparisons sit beside it:

- the **shuffled** control: the same regression onto beliefs permuted between episodes
  (:func:`~belieflens.analysis.decoders.folds.shuffle_by_group`), near or below 0 when the
  regression finds nothing real;
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

from belieflens.analysis.decoders.folds import fold_split, group_folds, shuffle_by_group
from belieflens.dims import EPISODE, LAG, LAYER, QUERY, STATE, TURN
from belieflens.errors import ParameterError

F64 = NDArray[np.float64]

DEFAULT_LAGS: tuple[int, ...] = (1, 2, 3, 4)
"""The ``k`` of the recent-token baselines by default (the last 1 to 4 tokens)."""

DEFAULT_LAM = 1e-4
"""The ridge penalty, relative to the features' mean variance (small: an almost plain
least-squares fit, kept only for rank-deficient features)."""


@dataclass(frozen=True, eq=False)
class Target:
    """The regression target of a file: ``y[query, state]`` and what it is."""

    values: F64
    labels: tuple[str, ...]
    name: str


def target_of(ds: xr.Dataset, target: str = "belief_state") -> Target:
    """``belief_state`` (the hidden-state belief) or ``oracle`` (the next-token distribution)
    of a token-level file, as a float array; anything else is one line."""
    if target == "belief_state":
        if "belief_state" not in ds.variables:
            raise ParameterError("this file has no belief_state: extract a token-level "
                                 "environment (coin-tokens, mess3, rrxor, z1r, hmm)")
        return Target(np.asarray(ds["belief_state"].values, dtype=np.float64),
                      tuple(str(s) for s in np.asarray(ds["state_label"].values)), target)
    if target == "oracle":
        labels = [str(s) for s in np.asarray(ds["outcome_label"].values)[0] if str(s)]
        y = np.asarray(ds["oracle"].values, dtype=np.float64)[:, : len(labels)]
        if np.isnan(y).any():
            raise ParameterError("target 'oracle': some read-outs have no oracle")
        return Target(y, tuple(labels), target)
    raise ParameterError(f"target = {target!r} is not allowed: belief_state or oracle")


@dataclass(frozen=True, eq=False)
class AffineMap:
    """An affine regression ``y = (x - x_mean) @ weight + y_mean`` (:func:`ridge_fit`)."""

    x_mean: F64
    """``[d]``."""
    weight: F64
    """``[d, k]``."""
    y_mean: F64
    """``[k]``."""

    def __call__(self, x: F64) -> F64:
        """The map at rows ``x [n, d]`` -> ``[n, k]``."""
        out: F64 = (x - self.x_mean) @ self.weight + self.y_mean
        return out


def ridge_fit(x_train: F64, y_train: F64, lam: float = DEFAULT_LAM) -> AffineMap:
    """Affine ridge regression fitted on ``(x_train, y_train)``; the penalty is ``lam`` times
    the mean feature variance (scale-free)."""
    mx, my = x_train.mean(axis=0), y_train.mean(axis=0)
    xc = x_train - mx
    gram = xc.T @ xc
    ridge = lam * max(float(np.trace(gram)) / max(gram.shape[0], 1), 1e-12)
    w = np.linalg.solve(gram + ridge * np.eye(gram.shape[0]), xc.T @ (y_train - my))
    return AffineMap(mx, w, my)


def ridge_predict(x_train: F64, y_train: F64, x_test: F64, lam: float = DEFAULT_LAM) -> F64:
    """Affine ridge regression fitted on ``(x_train, y_train)`` (:func:`ridge_fit`), predicted
    at ``x_test``."""
    return ridge_fit(x_train, y_train, lam)(x_test)


def heldout(x: F64, y: F64, folds: NDArray[np.int64], lam: float = DEFAULT_LAM) -> F64:
    """Held-out predictions of ``y`` from ``x``: each fold predicted by a fit on the others."""
    pred = np.empty_like(y)
    for k in range(int(folds.max()) + 1):
        train, test = fold_split(folds, k)
        pred[test] = ridge_predict(x[train], y[train], x[test], lam)
    return pred


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


def geometry(ds: xr.Dataset, rng: np.random.Generator, *, target: str = "belief_state",
             n_folds: int = 5, lags: Sequence[int] = DEFAULT_LAGS,
             lam: float = DEFAULT_LAM) -> xr.Dataset:
    """Held-out R² and MSE of the belief from the residual (per layer and concatenated), the
    shuffled control, the recent-token baselines and the next-token regressor (module doc).

    Args:
        ds: a cache file of a token-level environment.
        rng: seeds the folds (whole episodes) and the shuffled control.
        target: ``belief_state`` or ``oracle`` (for ``coin-tokens``, the posterior mean).
        n_folds: held-out folds of whole episodes.
        lags: the ``k`` of the recent-token baselines.
        lam: the ridge penalty (:data:`DEFAULT_LAM`).

    Returns:
        A Dataset: ``r2``, ``mse``, ``r2_shuffled`` over ``layer``; ``r2_linear_last``,
        ``r2_lookup_last`` over ``lag``; scalars ``r2_concat``, ``mse_concat``,
        ``r2_concat_shuffled``, ``r2_next_token``, ``mse_next_token``; attrs ``target``,
        ``best_layer``, ``n_rows``, ``n_episodes``.
    """
    if any(int(k) < 1 for k in lags):
        raise ParameterError(f"lags = {list(lags)} is not allowed: integers >= 1")
    tgt = target_of(ds, target)
    y = tgt.values
    episodes = np.asarray(ds[EPISODE].values)
    folds = group_folds(episodes, n_folds, rng)
    shuffled = shuffle_by_group(y, episodes, rng)
    resid = np.asarray(ds["resid"].values, dtype=np.float64)
    n_layer = resid.shape[1]
    r2, mse, r2_shuf = np.empty(n_layer), np.empty(n_layer), np.empty(n_layer)
    for layer in range(n_layer):
        x = resid[:, layer]
        r2[layer], mse[layer] = scores(y, heldout(x, y, folds, lam))
        r2_shuf[layer] = scores(shuffled, heldout(x, shuffled, folds, lam))[0]
    concat = resid.reshape(resid.shape[0], -1)
    r2_c, mse_c = scores(y, heldout(concat, y, folds, lam))
    r2_cs = scores(shuffled, heldout(concat, shuffled, folds, lam))[0]
    turn = np.asarray(ds[TURN].values, dtype=np.float64)[:, None]
    lin, look = [], []
    for k in lags:
        codes = last_tokens(ds, int(k))
        lin.append(scores(y, heldout(np.concatenate([one_hot(codes), turn], axis=1), y,
                                     folds, lam))[0])
        look.append(scores(y, lookup_heldout(codes, y, folds))[0])
    r2_nt, mse_nt = scores(y, heldout(next_token_features(ds), y, folds, lam))
    return xr.Dataset(
        {
            "r2": ((LAYER,), r2), "mse": ((LAYER,), mse), "r2_shuffled": ((LAYER,), r2_shuf),
            "r2_linear_last": ((LAG,), np.array(lin)), "r2_lookup_last": ((LAG,), np.array(look)),
            "r2_concat": r2_c, "mse_concat": mse_c, "r2_concat_shuffled": r2_cs,
            "r2_next_token": r2_nt, "mse_next_token": mse_nt,
        },
        coords={LAYER: np.arange(n_layer), LAG: np.array([int(k) for k in lags])},
        attrs={"target": tgt.name, "best_layer": int(np.nanargmax(r2)),
               "n_rows": int(y.shape[0]), "n_episodes": int(np.unique(episodes).size),
               "n_folds": n_folds},
    )


def regressed(ds: xr.Dataset, rng: np.random.Generator, *, target: str = "belief_state",
              layer: int | None = None, n_folds: int = 5, lam: float = DEFAULT_LAM
              ) -> xr.DataArray:
    """Held-out regressed beliefs ``[query, state]`` from one layer's residual, or from all
    layers concatenated (``layer=None``): the points of the simplex figure."""
    tgt = target_of(ds, target)
    resid = np.asarray(ds["resid"].values, dtype=np.float64)
    if layer is not None and not 0 <= layer < resid.shape[1]:
        raise ParameterError(f"layer = {layer} is not allowed: 0..{resid.shape[1] - 1}")
    x = resid.reshape(resid.shape[0], -1) if layer is None else resid[:, layer]
    folds = group_folds(np.asarray(ds[EPISODE].values), n_folds, rng)
    pred = heldout(x, tgt.values, folds, lam)
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
