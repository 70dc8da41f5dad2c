"""Several models on one study: one Dataset with a ``model`` dimension.

:func:`compare` takes cache files (or study directories) of the *same study* (environment,
parameters, seed and episodes) extracted from different models and returns one
:class:`xarray.Dataset` over ``model``:

- ``output_tvd_mean`` / ``output_tvd_sem`` ``(model, delivery, probe, turn)``: TVD of the
  model's debiased output belief to the oracle (mean ± SEM over episodes), with the point
  estimates ``estimate_mean`` and ``oracle_estimate_mean``.
- ``tvd_mean`` / ``tvd_sem`` ``(model, delivery, probe, turn, depth, source)``: the summary of
  :func:`belieflens.analysis.summary` (sources ``output``, ``logit-lens``, ``decoder``) on a
  common grid of **relative depth** ``depth`` in [0, 1] (layer / number of blocks; 0 = the
  embeddings, 1 = the last block's output). Models of different depths are aligned there:
  each grid point takes the model's nearest layer, whose own index is kept in the coordinate
  ``layer (model, depth)``. The grid has as many points as the deepest model has layers, so
  that model is shown layer for layer.
- ``best_depth``, ``best_layer``, ``best_tvd`` ``(model, delivery, probe, source)`` for the
  logit lens and the decoder: the layer (on the model's own layers, not the grid) whose TVD to
  the oracle, averaged over turns, is lowest, and its relative depth.
- ``slope``, ``slope_se``, ``slope_n`` ``(model, delivery, probe)``: the **updating slope**,
  the least-squares slope through the origin of the change of the model's point estimate
  from turn t−1 to t against the oracle's change over the same turn, over every episode and
  turn (1: updates as much as a Bayesian, 0: does not move with the evidence, > 1:
  over-reacts), with a standard error clustered by episode.
- ``rotation_tvd_mean`` ``(model, delivery, probe, rotation)`` and ``position_excess_mean``
  / ``position_excess_sem`` ``(model, delivery, probe, option)``: position bias
  (:func:`belieflens.analysis.position_bias.position_bias`) per model.
- ``n_layers (model)``, ``weights_hash (model)``, ``model_id (model)``, ``source_file
  (model)``: what each model is and where it came from; ``positive_control (model)``: whether
  it is a positive control.

**Positive controls.** A token-level study of a toy trained here on the token form of the
study's environment (its environment's ``control_of``, which the caller's ``control_of`` lookup
gives: :func:`belieflens.envs.positive_control`; e.g. a coin-toy study of the coin flips as
tokens beside the coin flip) may join the comparison although its environment, parameters and
episodes differ: it is a model known to update like the posterior, shown beside the language
models in the same tables and figures, and labelled ``NAME (positive control)``. Its read-out
after ``k`` flips stands at the study's turn ``k / per_turn`` (turns past the study's last
dropped), its ``next-token`` probe as ``next-flip``, and, having no chat to deliver evidence
in, it takes the same values in each of the study's deliveries.

:func:`belieflens.report.compare.compare_report` adds the text tables, the figures and
``compare.md`` (``belieflens compare FILE... --out DIR``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs, point_estimates
from belieflens.analysis.compare_floor import control_label, init_of, model_floors
from belieflens.analysis.floor import study_attr
from belieflens.analysis.position_bias import position_bias
from belieflens.analysis.summary import summary
from belieflens.analysis.tables import turn_table
from belieflens.dims import EPISODE, LAYER, TURN
from belieflens.episodes.capabilities import ControlOf
from belieflens.errors import ParameterError
from belieflens.types import DebiasMethod

MODEL = "model"
DEPTH = "depth"
SOURCE = "source"

COMPARED_SOURCES: tuple[str, ...] = ("output", "logit-lens", "decoder")
"""The read-outs compared across models (a tuned lens belongs to one model: not compared)."""

LAYER_SOURCES: tuple[str, ...] = ("logit-lens", "decoder")
"""The read-outs that have a value per layer, for which the closest depth is found."""

STUDY_KEYS: tuple[str, ...] = ("env_name", "env_params", "seed", "episodes")
"""Root attributes that must be equal for files to be one study."""

ControlLookup = Callable[[str], ControlOf | None]
"""Environment name -> what it is a positive control of (:func:`belieflens.envs.positive_control`
in the API), or ``None``."""


def no_controls(name: str) -> ControlOf | None:
    """The lookup that knows no positive controls (every file must be of the one study)."""
    return None

CONTROL_LABEL = " (positive control)"
"""Appended to a positive control's ``model`` name."""

CacheLike = str | os.PathLike[str]


def controls(attrs: Sequence[dict[str, Any]], control_of: ControlLookup) -> list[bool]:
    """Which files are positive controls (``control_of``) of the study of the first file that
    is not one; none where every file is of one token-level environment."""
    envs = [str(a.get("env_name")) for a in attrs]
    of = [control_of(e) for e in envs]
    study = next((e for e, c in zip(envs, of, strict=True) if c is None), None)
    return [study is not None and c is not None and c.env == study for c in of]


def check_same_study(files: Sequence[CacheLike], attrs: Sequence[dict[str, Any]],
                     control_of: ControlLookup = no_controls) -> None:
    """One line (:class:`ParameterError`) unless every file is the same study from a
    different model: same environment, parameters, seed and episodes, different weights
    (a positive control, :func:`controls`, is exempt from the first four)."""
    if len(files) < 2:
        raise ParameterError("compare needs at least two cache files (one per model)")
    is_control = controls(attrs, control_of)
    same = [(f, a) for f, a, c in zip(files, attrs, is_control, strict=True) if not c]
    first = same[0][1]
    for f, a in same[1:]:
        for key in STUDY_KEYS:
            u, v = study_attr(first, key), study_attr(a, key)
            if u != v:
                raise ParameterError(
                    f"{os.fspath(same[0][0])} and {os.fspath(f)} are different studies ({key} "
                    f"{_short(u)} vs {_short(v)}): compare needs one environment, parameters, "
                    "seed and episodes extracted from different models"
                )
    seen: dict[tuple[str, str], CacheLike] = {}
    for f, a in zip(files, attrs, strict=True):
        weights = (str(a.get("weights_hash")), str(a.get("dtype")))
        if weights in seen:
            raise ParameterError(
                f"{os.fspath(seen[weights])} and {os.fspath(f)} come from the same model "
                f"(weights sha256 {weights[0][:12]}..., {weights[1]}): compare needs "
                "different models"
            )
        seen[weights] = f


def _short(value: object) -> str:
    text = json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


TAUGHT_LABEL = " (taught)"
"""Appended to the ``model`` name of a taught adapter (``belieflens teach``), which stands
beside its base."""


def model_names(attrs: Sequence[dict[str, Any]]) -> list[str]:
    """The ``model`` coordinate: each file's model spec (a path's last part), a taught
    adapter's labelled :data:`TAUGHT_LABEL` and an untrained control's labelled so
    (``NAME (untrained seed 3)``), made unique."""
    names: list[str] = []
    for a in attrs:
        spec = str(a.get("model_spec") or a.get("model_id") or "model")
        base = Path(spec).name if ("/" in spec and Path(spec).exists()) else spec
        if str(a.get("model_source")) == "adapter":
            base += TAUGHT_LABEL
        base += control_label(a)
        name, i = base, 2
        while name in names:
            name, i = f"{base}#{i}", i + 1
        names.append(name)
    return names


def depth_grid(n_layers: Sequence[int]) -> np.ndarray:
    """The common relative-depth grid: as many points as the deepest model has layers."""
    return np.asarray(np.linspace(0.0, 1.0, max(n_layers) + 1), dtype=np.float64)


def nearest_layers(n_blocks: int, depth: np.ndarray) -> np.ndarray:
    """Each depth's nearest layer of a model with ``n_blocks`` blocks (layers 0..n_blocks)."""
    return np.asarray(np.rint(depth * n_blocks), dtype=np.int64)


def _episode_turn(x: xr.DataArray | np.ndarray) -> np.ndarray:
    if isinstance(x, xr.DataArray):
        return np.asarray(x.transpose(EPISODE, TURN).values, dtype=np.float64)
    return np.asarray(x, dtype=np.float64)


def updating_slope(
    est: xr.DataArray | np.ndarray, orc: xr.DataArray | np.ndarray
) -> tuple[float, float, int]:
    """Slope through the origin of Δ model estimate on Δ oracle estimate per turn, its
    episode-clustered standard error (CR1) and the number of (episode, turn) steps used.

    ``est`` and ``orc``: DataArrays with dims ``episode`` and ``turn``, or arrays
    ``[episode, turn]``; steps with a NaN or no oracle change are dropped. NaN where fewer
    than two episodes contribute.
    """
    dm = np.diff(_episode_turn(est), axis=1)
    do = np.diff(_episode_turn(orc), axis=1)
    ok = np.isfinite(dm) & np.isfinite(do) & (np.abs(do) > 0)
    n = int(ok.sum())
    sxx = float((do[ok] ** 2).sum())
    groups = np.flatnonzero(ok.any(axis=1))
    if n < 2 or sxx == 0 or groups.size < 2:
        return np.nan, np.nan, n
    beta = float((dm[ok] * do[ok]).sum()) / sxx
    resid = np.where(ok, dm - beta * do, 0.0)
    scores = (np.where(ok, do, 0.0) * resid).sum(axis=1)[groups]
    g = groups.size
    var = g / (g - 1) * float((scores**2).sum()) / sxx**2
    return beta, float(np.sqrt(var)), n


def _one_model(
    ds: xr.Dataset, depth: np.ndarray, *, method: DebiasMethod, decoders: bool, seed: int
) -> xr.Dataset:
    """One file's part of :func:`compare` (no ``model`` dimension yet)."""
    n_blocks = ds.sizes[LAYER] - 1
    beliefs = output_beliefs(ds, method=method)
    table = turn_table(beliefs)
    summ = summary(ds, None, method=method, decoders=decoders, seed=seed)
    tv = summ[["tvd_mean", "tvd_sem"]].sel({SOURCE: list(COMPARED_SOURCES)})
    layer_at = nearest_layers(n_blocks, depth)
    on_grid = tv.isel({LAYER: xr.DataArray(layer_at, dims=DEPTH)}).drop_vars(LAYER)
    by_layer = summ["tvd_mean"].sel({SOURCE: list(LAYER_SOURCES)}).mean(TURN, skipna=True)
    filled = by_layer.fillna(np.inf)
    best = filled.argmin(LAYER)
    best_tvd = by_layer.isel({LAYER: best}).drop_vars(LAYER)
    best_layer = best.where(best_tvd.notnull(), -1)
    est = point_estimates(beliefs)
    slopes = xr.apply_ufunc(
        updating_slope, est["estimate"], est["oracle_estimate"],
        input_core_dims=[[EPISODE, TURN], [EPISODE, TURN]], output_core_dims=[[], [], []],
        vectorize=True, output_dtypes=[np.float64, np.float64, np.int64],
    )
    bias = position_bias(ds, method=method)
    out = xr.Dataset({
        "output_tvd_mean": table["tvd_mean"],
        "output_tvd_sem": table["tvd_sem"],
        "estimate_mean": table["estimate_mean"],
        "oracle_estimate_mean": table["oracle_estimate_mean"],
        "tvd_mean": on_grid["tvd_mean"],
        "tvd_sem": on_grid["tvd_sem"],
        "best_layer": best_layer.astype(np.int64),
        "best_depth": (best / n_blocks).where(best_tvd.notnull()),
        "best_tvd": best_tvd,
        "slope": slopes[0],
        "slope_se": slopes[1],
        "slope_n": slopes[2],
        "rotation_tvd_mean": bias["rotation_tvd_mean"],
        "position_excess_mean": bias["position_excess_mean"],
        "position_excess_sem": bias["position_excess_sem"],
    })
    out = out.assign_coords({LAYER: (DEPTH, layer_at)})
    out["n_layers"] = n_blocks
    return out


def control_view(ds: xr.Dataset, study: dict[str, Any], control: ControlOf) -> xr.Dataset:
    """A positive control's read-outs as the study ``study`` (its root attributes) has them:
    after ``k`` flips at turn ``k / per_turn`` (other read-outs and turns past the study's
    ``turns`` dropped), probes renamed (``control.probes``)."""
    names = control.probes
    params = study_attr(study, "env_params")
    params = params if isinstance(params, dict) else {}
    per_turn, turns = int(params.get("per_turn", 1)), int(params.get("turns", 10))
    turn = np.asarray(ds[TURN].values, dtype=np.int64)
    keep = np.flatnonzero((turn % per_turn == 0) & (turn // per_turn <= turns))
    sub = ds.isel({"query": keep})
    probe = [names.get(str(p), str(p)) for p in np.asarray(sub["probe"].values)]
    return sub.assign_coords({TURN: ("query", turn[keep] // per_turn),
                              "probe": ("query", np.asarray(probe))})


def _each_delivery(part: xr.Dataset, deliveries: Sequence[str]) -> xr.Dataset:
    """A positive control's part with its one delivery's values under each of
    ``deliveries`` (it has no chat to deliver evidence in)."""
    src = str(part["delivery"].values[0])
    dim = xr.DataArray(list(deliveries), dims="delivery", name="delivery")
    data: dict[str, Any] = {}
    for name, var in part.data_vars.items():
        if "delivery" in var.dims:
            one = var.sel(delivery=src, drop=True)
            data[str(name)] = xr.concat([one] * len(deliveries), dim=dim).transpose(*var.dims)
        else:
            data[str(name)] = var
    return xr.Dataset(data, attrs=part.attrs)


def _file_attrs(paths: Sequence[CacheLike]) -> list[dict[str, Any]]:
    """Each file's root attributes, with its number of blocks and deliveries."""
    from belieflens.store.cache import open_cache

    attrs: list[dict[str, Any]] = []
    for f in paths:
        with open_cache(f) as ds:
            attrs.append(dict(ds.attrs))
            attrs[-1]["_n_layers"] = ds.sizes[LAYER] - 1
            attrs[-1]["_deliveries"] = sorted({str(d) for d in ds["delivery"].values})
    return attrs


def compare(files: Sequence[CacheLike], *, method: DebiasMethod = "geometric",
            decoders: bool = True, seed: int = 0,
            control_of: ControlLookup = no_controls) -> xr.Dataset:
    """One Dataset with a ``model`` dimension over cache files (or study directories) of the
    same study from different models; variables in the module docstring.

    Files of different studies (environment, parameters, seed or episodes) or two files of
    the same model are refused in one line (:class:`ParameterError`) before any analysis.
    ``decoders=False`` skips the linear decoders (their values are NaN); ``seed`` seeds their
    folds. ``control_of`` says which environments' studies may join as positive controls
    (none by default; the API passes :func:`belieflens.envs.positive_control`). Files are
    analysed one at a time.
    """
    from belieflens.store.cache import open_cache

    paths = list(files)
    attrs = _file_attrs(paths)
    check_same_study(paths, attrs, control_of)
    is_control = controls(attrs, control_of)
    study = attrs[is_control.index(False)]
    names = [n + CONTROL_LABEL if c else n
             for n, c in zip(model_names(attrs), is_control, strict=True)]
    depth = depth_grid([int(a["_n_layers"]) for a in attrs])
    parts = []
    for f, a, control in zip(paths, attrs, is_control, strict=True):
        of = control_of(str(a.get("env_name"))) if control else None
        ds = open_cache(f)
        try:
            if of is not None:
                part = _one_model(control_view(ds, study, of), depth, method=method,
                                  decoders=decoders, seed=seed)
                parts.append(_each_delivery(part, study["_deliveries"]))
            else:
                parts.append(_one_model(ds, depth, method=method, decoders=decoders, seed=seed))
        finally:
            ds.close()
    out = xr.concat(parts, dim=xr.DataArray(names, dims=MODEL, name=MODEL), join="outer",
                    coords="different", compat="equals")
    out = out.assign_coords({DEPTH: depth})
    out["layer"].attrs["description"] = "the model's own layer at each relative depth"
    out["model_id"] = (MODEL, [str(a.get("model_id", "")) for a in attrs])
    out["weights_hash"] = (MODEL, [str(a.get("weights_hash", "")) for a in attrs])
    out["source_file"] = (MODEL, [os.fspath(f) for f in paths])
    out["positive_control"] = (MODEL, np.asarray(is_control, dtype=np.int8))
    out["init"] = (MODEL, [init_of(a) for a in attrs])
    out["env_name"] = (MODEL, [str(a.get("env_name", "")) for a in attrs])
    out["model_source"] = (MODEL, [str(a.get("model_source", "")) for a in attrs])
    floors = model_floors(paths, attrs, names, depth, method=method, decoders=decoders,
                          seed=seed)
    if floors is not None:
        out = xr.merge([out, floors], join="left", combine_attrs="override")
    out.attrs.update(_attrs(study, attrs, is_control))
    out.attrs.update({"debias": method, "decoders": int(decoders), "decoder_seed": seed})
    out.attrs.update(_ATTR_NOTES)
    return out


_ATTR_NOTES = {
    "depth": "layer / number of blocks (0 = embeddings, 1 = last block's output); each "
             "grid point takes the model's nearest layer",
    "slope": "least squares through the origin of the change of the model's point "
             "estimate per turn on the oracle's change; standard error clustered by "
             "episode (CR1)",
}
"""What :func:`compare`'s depth grid and updating slope are, among its attributes."""


def _attrs(study: dict[str, Any], attrs: list[dict[str, Any]],
           is_control: list[bool]) -> dict[str, str]:
    """The study's attributes that :func:`compare` records, and its positive controls."""
    return {
        "env_name": str(study.get("env_name")),
        "env_params": str(study.get("env_params")),
        "seed": str(study.get("seed")),
        "episodes": str(study.get("episodes")),
        "positive_controls": "; ".join(
            f"{n}: {a.get('env_name')} {a.get('env_params')}, {a.get('episodes')} episodes"
            for n, a, c in zip(model_names(attrs), attrs, is_control, strict=True) if c),
    }
