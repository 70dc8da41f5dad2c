"""Does the output move as the oracle says it should for the belief an intervention implies?

On a steering or patching result of a token-level study, with the variables of
:mod:`belieflens.interventions.belief` (the belief regression's read of each clean residual,
and each hidden state's next-token distribution ``E``):

- the **implied belief** is the regression's read of the edited residual at the edited layer,
  projected onto the simplex (:func:`project_simplex`): for steering ``belief_read + α ·
  belief_shift`` (and the random control's shift), for patching the source's read where the
  position set patches the answer position (``answer``, ``all``) and the base's where it does
  not (``evidence``);
- its **predicted** next-token distribution is ``implied @ E``, what the oracle predicts for a
  model that holds that belief;
- the check is the TVD of the edited output to the prediction, beside the **unedited
  baseline**: the TVD of the clean (base) output to the same prediction. An output that moves
  as the oracle says has ``tvd_edited`` well below ``tvd_unedited``; one that ignores the
  edit has them equal. ``follow`` is ``1 − mean tvd_edited / mean tvd_unedited`` (1: the
  output lands on the prediction, 0: it stays where it was).

Both return xarray Datasets with named dims: steering ``(layer, alpha)``, patching ``(layer,
positions)``; means and SEMs over read-outs (pairs), and their count ``n``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.divergence import tvd_values
from belieflens.analysis.stats import mean_sem_values
from belieflens.dims import ALPHA, LAYER, POSITIONS
from belieflens.errors import ParameterError

F64 = NDArray[np.float64]

NEEDS = ("state_emission",)
"""What a result needs for the check (beside the reads of its kind)."""


def project_simplex(v: F64) -> F64:
    """The Euclidean projection of each row of ``v [..., k]`` onto the probability simplex.

    Examples:
        >>> project_simplex(np.array([[0.5, 0.5, 0.0], [1.2, -0.1, -0.1], [0.6, 0.6, 0.1]])
        ...                 ).round(4).tolist()
        [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]
    """
    x = np.asarray(v, dtype=np.float64)
    k = x.shape[-1]
    s = -np.sort(-x, axis=-1)
    css = np.cumsum(s, axis=-1) - 1.0
    idx = np.arange(1, k + 1)
    cond = s - css / idx > 0
    rho = k - 1 - np.argmax(cond[..., ::-1], axis=-1)
    theta = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1)
    out: F64 = np.maximum(x - theta, 0.0)
    return out


def has_check(ds: xr.Dataset) -> bool:
    """Whether a result file carries the reads of the belief check."""
    return "state_emission" in ds.variables and (
        "belief_read" in ds.variables or "base_belief_read" in ds.variables)


def _dist(logprob: F64, outcome: NDArray[np.int64], k: int) -> F64:
    """Distributions over the ``k`` outcomes from option log-probs ``[row, ..., option]``
    (renormalised over the first ``k`` options, placed by ``outcome [row, option]``)."""
    lp = np.asarray(logprob, dtype=np.float64)[..., :k]
    p = np.exp(lp - np.nanmax(lp, axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    order = np.argsort(outcome[:, :k], axis=1)
    shape = (order.shape[0],) + (1,) * (p.ndim - 2) + (k,)
    out: F64 = np.take_along_axis(p, order.reshape(shape), axis=-1)
    return out


def _summarise(edited: F64, unedited: F64, dims: tuple[str, ...], prefix: str = ""
               ) -> dict[str, Any]:
    """The check's variables from per-row TVDs ``[row, *dims]``."""
    out: dict[str, Any] = {}
    for name, x in (("tvd_edited", edited), ("tvd_unedited", unedited)):
        mean, sem, n = mean_sem_values(x)
        out[f"{prefix}{name}_mean"], out[f"{prefix}{name}_sem"] = (dims, mean), (dims, sem)
        out["n"] = (dims, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[f"{prefix}follow"] = (dims, 1.0 - out[f"{prefix}tvd_edited_mean"][1]
                                  / out[f"{prefix}tvd_unedited_mean"][1])
    return out


def _need(ds: xr.Dataset, names: tuple[str, ...]) -> None:
    missing = [n for n in (*NEEDS, *names) if n not in ds.variables]
    if missing:
        raise ParameterError("this result has no belief check (" + ", ".join(missing)
                             + "): run the intervention on a token-level study")


def steer_belief_check(ds: xr.Dataset) -> xr.Dataset:
    """The belief check of a steering result (module docstring), dims ``(layer, alpha)``:
    ``tvd_edited`` (steered output vs the prediction for the steered read),
    ``tvd_unedited`` (clean output vs that prediction), ``follow``, the same with prefix
    ``control_`` for the random direction, and ``tvd_predicted_move`` (how far the prediction
    moves from the clean read's) beside ``tvd_output_move`` (how far the output moves)."""
    _need(ds, ("belief_read", "belief_shift", "control_belief_shift"))
    e = np.asarray(ds["state_emission"].values, dtype=np.float64)
    k = e.shape[1]
    outcome = np.asarray(ds["outcome"].values, dtype=np.int64)
    folds = np.asarray(ds["query_fold"].values, dtype=np.int64)
    read = np.asarray(ds["belief_read"].values)[:, :, None, :]  # query layer 1 state
    alphas = np.asarray(ds[ALPHA].values, dtype=np.float64)[None, None, :, None]
    clean = _dist(np.asarray(ds["clean_logprob"].values), outcome, k)[:, None, None, :]
    base_pred = project_simplex(read) @ e
    res: dict[str, Any] = {}
    dims = (LAYER, ALPHA)
    for prefix, shift_var, out_var in (("", "belief_shift", "steered_logprob"),
                                       ("control_", "control_belief_shift", "control_logprob")):
        shift = np.moveaxis(np.asarray(ds[shift_var].values)[:, folds], 1, 0)[:, :, None, :]
        pred = project_simplex(read + alphas * shift) @ e  # query layer alpha outcome
        out = _dist(np.asarray(ds[out_var].transpose("query", LAYER, ALPHA, ...).values),
                    outcome, k)
        res.update(_summarise(tvd_values(out, pred), tvd_values(clean, pred), dims, prefix))
        if not prefix:
            res["tvd_predicted_move_mean"] = (dims, np.nanmean(tvd_values(pred, base_pred), axis=0))
            res["tvd_output_move_mean"] = (dims, np.nanmean(tvd_values(out, clean), axis=0))
    return xr.Dataset(res, coords={LAYER: ds[LAYER].values, ALPHA: ds[ALPHA].values},
                      attrs={"emission_max_error": ds.attrs.get("emission_max_error", np.nan)})


def patch_belief_check(ds: xr.Dataset) -> xr.Dataset:
    """The belief check of a patching result (module docstring), dims ``(layer, positions)``:
    ``tvd_edited`` (patched output vs the prediction for the patched read),
    ``tvd_unedited`` (base output vs that prediction) and ``follow``."""
    _need(ds, ("base_belief_read", "source_belief_read"))
    e = np.asarray(ds["state_emission"].values, dtype=np.float64)
    k = e.shape[1]
    outcome = np.asarray(ds["outcome"].values, dtype=np.int64)
    sets = [str(s) for s in np.asarray(ds[POSITIONS].values)]
    at_answer = np.array([s != "evidence" for s in sets])[None, None, :, None]
    base_read = np.asarray(ds["base_belief_read"].values)[:, :, None, :]
    src_read = np.asarray(ds["source_belief_read"].values)[:, :, None, :]
    pred = project_simplex(np.where(at_answer, src_read, base_read)) @ e  # pair layer set out
    patched = _dist(np.asarray(ds["patched_logprob"].transpose("pair", LAYER, POSITIONS,
                                                               ...).values), outcome, k)
    base = _dist(np.asarray(ds["base_logprob"].values), outcome, k)[:, None, None, :]
    res = _summarise(tvd_values(patched, pred), tvd_values(base, pred), (LAYER, POSITIONS))
    return xr.Dataset(res, coords={LAYER: ds[LAYER].values, POSITIONS: sets},
                      attrs={"emission_max_error": ds.attrs.get("emission_max_error", np.nan)})
