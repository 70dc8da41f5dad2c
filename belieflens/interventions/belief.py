"""What a token-level study's belief regression reads off an intervention's residuals.

A token-level study (``belief_state[query, state]``, :mod:`belieflens.envs.tokens.env`) holds
the exact belief over the process's hidden states at every read-out, and ``ds.bl.geometry``'s
affine regression (:func:`~belieflens.analysis.geometry.ridge_fit`) reads it back from the
residual. :func:`with_belief_reads` adds to a result the variables that say which belief the
edited residual implies (where its plan names how: :func:`steer_reads`, :func:`patch_reads`),
so that
:mod:`belieflens.analysis.belief_check` can compare the edited output with the oracle's
next-token distribution for that belief:

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
  sets patch the source's residual in there, the ``evidence`` set never does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.geometry import ridge_fit
from belieflens.dims import FOLD, LAYER, OUTCOME, PAIR, QUERY, STATE
from belieflens.errors import ParameterError
from belieflens.interventions.directions import episode_folds
from belieflens.interventions.readouts import StudyReadouts, oracle_mean, study_resid

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
    with xr.open_dataset(study.path, engine="h5netcdf") as ds:
        return "belief_state" in ds.variables


def study_beliefs(study: StudyReadouts) -> F64:
    """The study's exact beliefs ``[query, state]``; one line for a study without them."""
    with xr.open_dataset(study.path, engine="h5netcdf") as ds:
        if "belief_state" not in ds.variables:
            raise ParameterError(
                f"{study.path} has no belief_state: the belief direction and the belief check "
                "need a token-level study (one that stores belief_state)")
        return np.asarray(ds["belief_state"].values, dtype=np.float64)


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


def steer_reads(ds: xr.Dataset, study: StudyReadouts, beliefs: F64, layers: list[int]) -> None:
    """The steering variables: the reads by each fold's map (fitted, as the directions were,
    on the other folds' read-outs that have an oracle) and the shifts per unit α."""
    rows = np.asarray(ds["study_query"].values, dtype=np.int64)
    folds = np.asarray(ds["query_fold"].values, dtype=np.int64)
    ok = np.isfinite(oracle_mean(study.table)[rows])
    x = study_resid(study, layers, list(rows))
    y = beliefs[rows]
    n_fold = int(ds.sizes[FOLD])
    read = np.full((rows.size, len(layers), y.shape[1]), np.nan)
    shift = np.full((len(layers), n_fold, y.shape[1]), np.nan)
    control = np.full_like(shift, np.nan)
    steer = ds["fold_direction"].values * ds["fold_resid_std"].values[..., None]
    ctrl_dir = np.asarray(ds["control_direction"].values)
    for li in range(len(layers)):
        for f in range(n_fold):
            train = (folds != f) & ok
            fit = ridge_fit(x[train, li], y[train])
            read[folds == f, li] = fit(x[folds == f, li])
            shift[li, f] = steer[li, f] @ fit.weight
            control[li, f] = float(ds["fold_resid_std"].values[li, f]) * ctrl_dir[li] @ fit.weight
    ds["belief_read"] = ((QUERY, LAYER, STATE), read)
    ds["belief_shift"] = ((LAYER, FOLD, STATE), shift)
    ds["control_belief_shift"] = ((LAYER, FOLD, STATE), control)
    ds["belief_read"].attrs["description"] = (
        "the clean residual's belief read by the map fitted without the read-out's fold")
    ds["belief_shift"].attrs["description"] = "change of the read per unit alpha (steering)"


def patch_reads(ds: xr.Dataset, study: StudyReadouts, beliefs: F64, layers: list[int]) -> None:
    """The patching variables: every read-out's read by the map fitted without its episode."""
    groups = np.asarray(study.table["episode"].values)
    folds, k = episode_folds(groups, FOLDS, np.random.default_rng(SEED))
    if k < 2:
        return  # one episode: no read-out can be read by a map fitted without it
    x = study_resid(study, layers)
    read = np.full((beliefs.shape[0], len(layers), beliefs.shape[1]), np.nan)
    for li in range(len(layers)):
        for f in range(k):
            fit = ridge_fit(x[folds != f, li], beliefs[folds != f])
            read[folds == f, li] = fit(x[folds == f, li])
    for name, var in (("base", "base_query"), ("source", "source_query")):
        ds[f"{name}_belief_read"] = ((PAIR, LAYER, STATE),
                                     read[np.asarray(ds[var].values, dtype=np.int64)])
        ds[f"{name}_belief_read"].attrs["description"] = (
            f"the {name}'s clean residual's belief read (map fitted without its episode)")
    ds.attrs["belief_read_folds"] = k
