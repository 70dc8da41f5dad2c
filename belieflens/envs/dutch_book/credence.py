"""Binary credences (P(Yes)) from a cache file, with answer variants summed.

A yes/no question is read in one of two ways, and both are handled the same:

- as an MCQ (``A. Yes`` / ``B. No``, read as the letter; the shipped Dutch-book
  read-out): each rotation shows each answer once;
- as a direct continuation (`` Yes`` / `` No`` and variants such as ``yes`` or
  ``Yes`` without a space): several options of one rotation stand for the same
  outcome.

Per rotation, the probability of each outcome is the sum over all options that
stand for it (log-sum-exp of their log-probs), renormalised over the two
outcomes; rotations are then pooled with :func:`belieflens.episodes.latin.debias`
(geometric or arithmetic). With one option per outcome this equals the generic
debiased belief of :func:`belieflens.analysis.beliefs.output_beliefs`.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import (
    INSTANCE_DIMS,
    PRESENT,
    by_instance,
    first_present,
    query_n_outcome,
)
from belieflens.dims import LAYER, OPTION, PROBE, QUERY, ROTATION
from belieflens.episodes.latin import debias
from belieflens.errors import CacheFileError
from belieflens.lens.apply import lens_logits
from belieflens.types import DebiasMethod


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    s = np.sum(np.exp(x - m), axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.asarray(np.squeeze(m + np.log(s), axis=axis))


def outcome_logprob(
    logprob: np.ndarray, outcome: np.ndarray, n_outcome: int
) -> np.ndarray:
    """Sum option probabilities per outcome: ``[row, ..., option]`` -> ``[row, ..., outcome]``.

    ``outcome[row, option]`` is the outcome an option stands for (-1 = padding).
    An outcome with no option in a row gets ``-inf``.
    """
    lp = np.asarray(logprob, dtype=np.float64)
    extra = lp.ndim - 2
    out = []
    for o in range(n_outcome):
        mask = (np.asarray(outcome) == o).reshape(
            outcome.shape[0], *([1] * extra), outcome.shape[1]
        )
        out.append(_logsumexp(np.where(mask & np.isfinite(lp), lp, -np.inf), axis=-1))
    return np.stack(out, axis=-1)


def _binary_one(
    lp: np.ndarray, outcome: np.ndarray, present: np.ndarray, k: np.ndarray, *,
    method: DebiasMethod,
) -> np.ndarray:
    """One instance: ``lp [rotation, ..., option]`` -> P(outcome 0) ``[...]`` (NaN unless its
    probe has two outcomes and every present rotation gives both a finite log-prob)."""
    res = np.full(lp.shape[1:-1], np.nan)
    if not present.any() or int(k) != 2:
        return res
    rows = np.ascontiguousarray(lp[present])
    shown = outcome[present]
    agg = outcome_logprob(rows, shown, 2)  # [rotation, ..., 2]
    if not np.all(np.isfinite(agg)):
        return res
    moved = np.moveaxis(agg, 0, -2)  # [..., rotation, 2]
    rot = np.tile(np.arange(2), (rows.shape[0], 1))
    return np.asarray(debias(moved, rot, method=method)[..., 0])


def pooled_binary(
    ds: xr.Dataset, logprob: np.ndarray, probe: str, method: DebiasMethod
) -> xr.DataArray:
    """P(outcome 0) of ``probe`` per (delivery, episode, turn, ...), variants summed.

    ``logprob`` is ``[query, ..., option]`` (option log-probs or lens log-probs); the
    rotations of each instance are gathered by :func:`~belieflens.analysis.beliefs.by_instance`.
    """
    names = sorted({str(p) for p in np.asarray(ds[PROBE].values).astype(str)})
    if probe not in names:
        raise CacheFileError(f"cache file has no probe {probe!r} (has {', '.join(names)})")
    extra = [LAYER] if np.ndim(logprob) == 3 else []
    grid = by_instance(ds, {
        "logprob": xr.DataArray(np.asarray(logprob, dtype=np.float64),
                                dims=(QUERY, *extra, OPTION)),
        "outcome": xr.DataArray(np.asarray(ds["outcome"].values).astype(np.int64),
                                dims=(QUERY, OPTION)),
        "n_outcome": xr.DataArray(query_n_outcome(ds), dims=QUERY),
    }, fill_value={"outcome": -1, "n_outcome": 0})
    out: xr.DataArray = xr.apply_ufunc(
        lambda lp, o, p, k: _binary_one(lp, o, p, k, method=method),
        grid["logprob"], grid["outcome"], grid[PRESENT],
        first_present(grid["n_outcome"], grid[PRESENT]),
        input_core_dims=[[ROTATION, *extra, OPTION], [ROTATION, OPTION], [ROTATION], []],
        output_core_dims=[extra],
        vectorize=True,
        output_dtypes=[np.float64],
    )
    out = out.transpose(*INSTANCE_DIMS, *extra)
    if extra:
        out = out.assign_coords({LAYER: list(range(out.sizes[LAYER]))})
    return out.sel({PROBE: probe}, drop=True)


def yes_credence(
    ds: xr.Dataset, probe: str, *, method: DebiasMethod = "geometric"
) -> xr.DataArray:
    """The model's credence P(Yes) per (delivery, episode, turn) from its output log-probs."""
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)
    return pooled_binary(ds, lp, probe, method)


def lens_yes_credence(
    ds: xr.Dataset, probe: str, *, method: DebiasMethod = "geometric"
) -> xr.DataArray:
    """P(Yes) at every layer through the logit lens (first token of each option).

    Dims ``(delivery, episode, turn, layer)``.
    """
    logits = np.asarray(lens_logits(ds), dtype=np.float64)  # (query, layer, option)
    logits = np.where(np.isnan(logits), -np.inf, logits)
    lse = _logsumexp(logits, axis=-1)[..., None]
    return pooled_binary(ds, logits - lse, probe, method)
