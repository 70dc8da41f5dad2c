"""Every probe instance on its own: beliefs and their divergence to the oracle, per layer.

The tables of a study (:mod:`.tables`, :mod:`.summary`) average over episodes; a viewer
that shows *one* episode needs the instances themselves. :func:`episode_views` arranges,
from beliefs the analysis has already computed (no residual is read here):

- ``belief``, ``oracle`` ``(delivery, probe, episode, turn, outcome)``: the model's debiased
  output belief and the exact Bayesian one (:func:`~.beliefs.output_beliefs`);
- ``lens_belief`` ``(source, delivery, probe, episode, turn, layer, outcome)``: each lens's
  debiased belief per layer (:func:`~.beliefs.lens_beliefs`; ``source`` ``logit-lens``, and
  ``tuned-lens`` where one is given);
- ``output_divergence`` ``(metric, delivery, probe, episode, turn)`` and
  ``lens_divergence`` ``(metric, source, delivery, probe, episode, turn, layer)``: the
  distance of each belief from the oracle for every metric of :data:`VIEW_METRICS`
  (:mod:`.divergence`, oracle first: ``kl`` = KL(oracle ‖ belief)), NaN where there is no
  oracle;
- ``lens_divergence_mean`` ``(metric, source, delivery, probe, turn, layer)`` and
  ``output_divergence_mean`` ``(metric, delivery, probe, turn)``: their means over episodes;
- ``outcome_label`` ``(probe, outcome)``.

Each divergence variable's ``units`` attribute maps a metric to its unit (:data:`UNITS`).

:func:`episode_tokens` gives, per instance, the context token ids of the read-out a viewer
shows (the instance's first present rotation) and its answer position, with the file's
token-text table where it has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import PRESENT, by_instance, first_present
from belieflens.analysis.divergence import js, kl, tvd
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.tables import unpad
from belieflens.dims import EPISODE, LAYER, OUTCOME, QUERY, ROTATION, SOURCE, TEXT_TOKEN, TOKEN

METRIC = "metric"
"""The dimension of the divergence variables: one of :data:`VIEW_METRICS`."""

VIEW_METRICS: tuple[str, ...] = ("tvd", "kl", "js")
"""The metrics a viewer offers: total variation, KL(oracle ‖ belief), Jensen-Shannon."""

UNITS: Mapping[str, str] = {"tvd": "TVD (0 = the oracle, 1 = disjoint)",
                            "kl": "KL(oracle ‖ belief), nats", "js": "JS divergence, nats"}
"""Each metric's unit, as a viewer labels its axis."""

_DISTANCE: Mapping[str, Callable[[xr.DataArray, xr.DataArray, str], xr.DataArray]] = {
    "tvd": tvd, "kl": kl, "js": js}


def _divergences(belief: xr.DataArray, oracle: xr.DataArray, labels: xr.DataArray,
                 metrics: Sequence[str]) -> xr.DataArray:
    """Every metric of ``belief`` against ``oracle`` over ``outcome``, stacked on ``metric``."""
    o, b = unpad(oracle, labels), unpad(belief, labels)
    parts = [_DISTANCE[m](o, b, OUTCOME) for m in metrics]
    return xr.concat(parts, dim=xr.DataArray(list(metrics), dims=METRIC, name=METRIC))


def episode_views(
    beliefs: xr.Dataset,
    lenses: Mapping[str, xr.DataArray],
    metrics: Sequence[str] = VIEW_METRICS,
) -> xr.Dataset:
    """Per-instance beliefs and divergences (module docstring for the variables).

    ``beliefs`` is :func:`~.beliefs.output_beliefs` of a file; ``lenses`` maps a source name
    (``logit-lens``, ``tuned-lens``) to that file's :func:`~.beliefs.lens_beliefs` with the same
    debiasing. ``metrics`` are names of :data:`VIEW_METRICS`.
    """
    unknown = [m for m in metrics if m not in _DISTANCE]
    if unknown:
        raise ValueError(f"metrics {unknown} are not among {', '.join(VIEW_METRICS)}")
    labels, oracle = beliefs["outcome_label"], beliefs["oracle"]
    names = list(lenses)
    source = xr.DataArray(names, dims=SOURCE, name=SOURCE)
    lens = xr.concat([lenses[n].transpose(*beliefs["belief"].dims[:-1], LAYER, OUTCOME)
                      for n in names], dim=source)
    out_div = _divergences(beliefs["belief"], oracle, labels, metrics)
    lens_div = _divergences(lens, oracle, labels, metrics)
    units = {"units": "; ".join(f"{m}: {UNITS[m]}" for m in metrics)}
    res = xr.Dataset({
        "belief": beliefs["belief"],
        "oracle": oracle,
        "lens_belief": lens.transpose(SOURCE, ..., LAYER, OUTCOME),
        "output_divergence": out_div.transpose(METRIC, ...).assign_attrs(units),
        "lens_divergence": lens_div.transpose(METRIC, SOURCE, ..., LAYER).assign_attrs(units),
        "output_divergence_mean": mean_sem(out_div, EPISODE)["mean"].assign_attrs(units),
        "lens_divergence_mean": mean_sem(lens_div, EPISODE)["mean"]
        .transpose(METRIC, SOURCE, ..., LAYER).assign_attrs(units),
        "outcome_label": labels,
    })
    res.attrs = {"debias": str(beliefs.attrs.get("debias", "")),
                 "metrics": ", ".join(metrics), "sources": ", ".join(names)}
    return res


def episode_tokens(ds: xr.Dataset) -> xr.Dataset:
    """The tokens of the read-out shown for each instance (its lowest present rotation).

    Variables ``input_ids`` ``(delivery, probe, episode, turn, token)`` (-1: padding or no
    read-out), ``answer_pos`` and ``rotation`` ``(delivery, probe, episode, turn)`` (-1: no
    read-out); and, where the file records them, ``token_text_id`` and ``token_text``
    ``(text_token,)`` (each id decoded alone at extraction).
    """
    grid = by_instance(ds, {"row": xr.DataArray(np.arange(ds.sizes[QUERY]), dims=QUERY),
                            ROTATION + "_of": xr.DataArray(
                                np.asarray(ds[ROTATION].values, dtype=np.int64), dims=QUERY)},
                       fill_value={"row": -1, ROTATION + "_of": -1})
    row = first_present(grid["row"], grid[PRESENT])
    rotation = first_present(grid[ROTATION + "_of"], grid[PRESENT])
    flat = np.asarray(row.values, dtype=np.int64).reshape(-1)
    have = flat >= 0
    taken = np.flatnonzero(have)
    n_tok = ds.sizes[TOKEN]
    ids = np.full((flat.size, n_tok), -1, dtype=np.int32)
    pos = np.full(flat.size, -1, dtype=np.int32)
    if taken.size:
        order = np.argsort(flat[taken])  # ascending rows: one pass over the file
        rows = flat[taken][order]
        ids[taken[order]] = np.asarray(ds["input_ids"].isel({QUERY: rows}).values)
        pos[taken[order]] = np.asarray(ds["answer_pos"].isel({QUERY: rows}).values)
    shape = row.shape
    out = xr.Dataset({
        "input_ids": ((*row.dims, TOKEN), ids.reshape(*shape, n_tok)),
        "answer_pos": (row.dims, pos.reshape(shape)),
        "rotation": (row.dims, np.where(have, rotation.values.reshape(-1), -1).reshape(shape)),
    }, coords={d: row[d].values for d in row.dims})
    if "token_text_id" in ds.variables and "token_text" in ds.variables:
        out["token_text_id"] = (TEXT_TOKEN, np.asarray(ds["token_text_id"].values, np.int32))
        out["token_text"] = (TEXT_TOKEN, np.asarray(ds["token_text"].values).astype(str))
    return out
