"""What a token-level study's belief regression reads off an intervention's residuals.

A token-level study (``belief_state[query, state]``, :mod:`belieflens.envs.tokens.env`) holds
the exact belief over the process's hidden states at every read-out, and ``ds.bl.geometry``'s
affine ridge regression reads it back from the residual. Here each read is by the map of the
one estimator (:func:`~belieflens.analysis.decoders.estimator.ridge_map`: standardised
features, λ chosen by leave-one-fold-out over the training rows' own folds of whole episodes,
never the read fold's), and the λ of each map is stored as ``belief_read_lam[layer, fold]``
(:func:`cross_fit_reads`). :func:`with_belief_reads` adds to a result the variables that say
which belief the edited residual implies (where its plan names how: :func:`steer_reads`,
:func:`patch_reads`), so that :mod:`belieflens.analysis.belief_check` can compare the edited
output with the oracle's next-token distribution for that belief:

- ``state_emission[state, outcome]``: the next-token distribution of each hidden state, the
  least-squares map from the study's beliefs to its oracles (exact for a hidden Markov
  process, whose oracle is ``belief @ emission``; attribute ``emission_max_error``);
- steering: ``belief_read[query, layer, state]``, the clean residual's read by the map fitted
  without the read-out's fold (the steering folds, ``query_fold``), and ``belief_shift`` /
  ``control_belief_shift[layer, fold, state]``, the read's change per unit α along the
  fold's direction and the random control (the map is affine: the steered read is
  ``belief_read + α · belief_shift``);
- patching: ``base_belief_read`` and ``source_belief_read[pair, layer, state]``, each read-out's
  clean residual read by the map fitted without its episode (:data:`FOLDS` folds of whole
  episodes, seed :data:`SEED`). The answer position is the last context token, which a pair
  shares (:func:`~belieflens.interventions.align.why_unaligned`): the ``answer`` and ``all``
  sets patch the source's residual in there, the ``evidence`` set never does;
- both: ``belief_read_lam[layer, fold]``, the penalty of each fold's map.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.decoders.estimator import RidgeMap, ridge_map
from belieflens.dims import FOLD, LAYER, OUTCOME, PAIR, QUERY, STATE
from belieflens.errors import CacheFileError, ParameterError
from belieflens.interventions.directions import episode_folds
from belieflens.interventions.readouts import StudyReadouts, oracle_mean, study_resid
from belieflens.store.integrity import damage_line

F64 = NDArray[np.float64]

BeliefReads = Callable[[xr.Dataset, "StudyReadouts", F64, list[int]], None]
"""Adds an intervention's belief variables to its result ``(ds, study, beliefs, layers)``:
:func:`steer_reads`, :func:`patch_reads`."""

FOLDS = 5
"""Folds of whole episodes over which a patch study's reads are cross-fitted."""

SEED = 0
"""Seed of those folds."""


def has_beliefs(study: StudyReadouts) -> bool:
    """Whether the study file holds ``belief_state`` (a token-level study)."""
    try:
        with h5py.File(study.path, "r") as f:
            return "belief_state" in f
    except OSError as e:
        raise CacheFileError(f"{study.path} is corrupt or unreadable: {e}") from None


def study_beliefs(study: StudyReadouts) -> F64:
    """The study's exact beliefs ``[query, state]``; one line for a study without them."""
    try:
        with h5py.File(study.path, "r") as f:
            if "belief_state" not in f:
                raise ParameterError(
                    f"{study.path} has no belief_state: the belief direction and the belief "
                    "check need a token-level study (one that stores belief_state)")
            return np.asarray(f["belief_state"][...], dtype=np.float64)
    except OSError as e:
        raise CacheFileError(damage_line(study.path, "belief_state", e)) from None


def state_emission(beliefs: F64, oracle: F64) -> tuple[F64, float]:
    """The least-squares ``E [state, outcome]`` with ``oracle ≈ beliefs @ E``, and the largest
    absolute error of that map over the rows.

    Examples:
        >>> e = np.array([[0.9, 0.1], [0.2, 0.8]])
        >>> b = np.array([[1.0, 0.0], [0.5, 0.5], [0.3, 0.7]])
        >>> fit, err = state_emission(b, b @ e)
        >>> np.allclose(fit, e), err < 1e-12
        (True, True)
    """
    emission = np.asarray(np.linalg.lstsq(beliefs, oracle, rcond=None)[0], dtype=np.float64)
    return emission, float(np.abs(beliefs @ emission - oracle).max(initial=0.0))


def with_belief_reads(ds: xr.Dataset, study: StudyReadouts,
                      reads: BeliefReads | None) -> xr.Dataset:
    """``ds``, a result on ``study``, with the module docstring's variables where its plan
    names ``reads`` and the study holds beliefs; else as it is."""
    if reads is None or not has_beliefs(study):
        return ds
    beliefs = study_beliefs(study)
    n_out = int(np.asarray(study.table["n_outcome"].values).max())
    oracle = np.asarray(study.table["oracle"].values, dtype=np.float64)[:, :n_out]
    emission, err = state_emission(beliefs, oracle)
    ds["state_emission"] = ((STATE, OUTCOME), emission)
    ds["state_emission"].attrs["description"] = (
        "next-token distribution of each hidden state (least squares: oracle = belief @ E)")
    ds.attrs["emission_max_error"] = err
    layers = [int(v) for v in np.asarray(ds[LAYER].values)]
    reads(ds, study, beliefs, layers)
    return ds


@dataclass(frozen=True, eq=False)
class CrossFitReads:
    """Each row read by the map fitted without its fold (:func:`cross_fit_reads`)."""

    read: F64
    """``[row, layer, state]``."""
    maps: list[list[RidgeMap]]
    """``maps[layer][fold]``, fitted on the other folds' training rows."""

    @property
    def lam(self) -> F64:
        """Each map's penalty ``[layer, fold]``."""
        return np.array([[m.lam for m in by] for by in self.maps], dtype=np.float64)


def inner_folds(outer: NDArray[np.int64], episodes: NDArray[Any]) -> NDArray[np.int64]:
    """The folds a map's λ is cross-validated over on an outer fold's training rows: the other
    outer folds (``outer``, those rows' folds) where they are at least two; else (two outer
    folds in all) :data:`FOLDS` folds of the rows' own episodes (seed :data:`SEED`), and one
    fold (the fallback penalty) where the rows are a single episode."""
    if np.unique(outer).size >= 2:
        return outer
    return episode_folds(episodes, FOLDS, np.random.default_rng(SEED))[0]


def cross_fit_reads(x: F64, y: F64, folds: NDArray[np.int64], episodes: NDArray[Any],
                    train: NDArray[np.bool_] | None = None) -> CrossFitReads:
    """The read of each row of ``x [row, layer, d]`` by the ridge map of ``y [row, state]``
    fitted on the rows of the other ``folds`` (those of ``train`` only, if given), its λ
    chosen over their folds (:func:`inner_folds`, grouped by ``episodes``)."""
    ok = np.ones(folds.size, dtype=bool) if train is None else train
    n_fold = int(folds.max()) + 1
    read = np.full((x.shape[0], x.shape[1], y.shape[1]), np.nan)
    maps: list[list[RidgeMap]] = [[] for _ in range(x.shape[1])]
    for f in range(n_fold):
        fit_rows = (folds != f) & ok
        inner = inner_folds(folds[fit_rows], episodes[fit_rows])
        for li in range(x.shape[1]):
            fit = ridge_map(x[fit_rows, li], y[fit_rows], inner)
            read[folds == f, li] = fit(x[folds == f, li])
            maps[li].append(fit)
    return CrossFitReads(read, maps)


def _store_lam(ds: xr.Dataset, lam: F64) -> None:
    ds["belief_read_lam"] = ((LAYER, FOLD), lam)
    ds["belief_read_lam"].attrs["description"] = (
        "ridge penalty (standardised features) of each fold's belief map, chosen by "
        "cross-validation over the other folds' episodes")


def steer_reads(ds: xr.Dataset, study: StudyReadouts, beliefs: F64, layers: list[int]) -> None:
    """The steering variables: the reads by each fold's map (fitted, as the directions were,
    on the other folds' read-outs that have an oracle) and the shifts per unit α."""
    rows = np.asarray(ds["study_query"].values, dtype=np.int64)
    folds = np.asarray(ds["query_fold"].values, dtype=np.int64)
    ok = np.isfinite(oracle_mean(study.table)[rows])
    episodes = np.asarray(study.table["episode"].values)[rows]
    fits = cross_fit_reads(study_resid(study, layers, list(rows)), beliefs[rows], folds,
                           episodes, ok)
    std = np.asarray(ds["fold_resid_std"].values)
    steer = ds["fold_direction"].values * std[..., None]
    ctrl_dir = np.asarray(ds["control_direction"].values)
    shift = np.stack([np.stack([steer[li, f] @ m.weight for f, m in enumerate(by)])
                      for li, by in enumerate(fits.maps)])
    control = np.stack([np.stack([float(std[li, f]) * ctrl_dir[li] @ m.weight
                                  for f, m in enumerate(by)]) for li, by in enumerate(fits.maps)])
    ds["belief_read"] = ((QUERY, LAYER, STATE), fits.read)
    ds["belief_shift"] = ((LAYER, FOLD, STATE), shift)
    ds["control_belief_shift"] = ((LAYER, FOLD, STATE), control)
    ds["belief_read"].attrs["description"] = (
        "the clean residual's belief read by the map fitted without the read-out's fold")
    ds["belief_shift"].attrs["description"] = "change of the read per unit alpha (steering)"
    _store_lam(ds, fits.lam)


def patch_reads(ds: xr.Dataset, study: StudyReadouts, beliefs: F64, layers: list[int]) -> None:
    """The patching variables: every read-out's read by the map fitted without its episode."""
    groups = np.asarray(study.table["episode"].values)
    folds, k = episode_folds(groups, FOLDS, np.random.default_rng(SEED))
    if k < 2:
        return  # one episode: no read-out can be read by a map fitted without it
    fits = cross_fit_reads(study_resid(study, layers), beliefs, folds, groups)
    for name, var in (("base", "base_query"), ("source", "source_query")):
        ds[f"{name}_belief_read"] = ((PAIR, LAYER, STATE),
                                     fits.read[np.asarray(ds[var].values, dtype=np.int64)])
        ds[f"{name}_belief_read"].attrs["description"] = (
            f"the {name}'s clean residual's belief read (map fitted without its episode)")
    ds.attrs["belief_read_folds"] = k
    _store_lam(ds, fits.lam)
