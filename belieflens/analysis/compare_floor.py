"""Floors in ``compare``: each model beside the untrained controls among the compared files.

A file extracted with ``--init random:SEED`` (or ``shuffled:SEED``) is a control: ``compare``
labels it ``NAME (untrained seed S)`` and, for each trained model of its architecture (a
``shuffled`` control: the model it was made from, its ``model_base_weights_hash``), the
model's logit-lens and decoder TVD per layer are set beside the controls' as in
:func:`belieflens.analysis.floor.floor` (trained value, floor mean and range over seeds,
selectivity with its interval over episodes and seeds, corrected across layers), on the
comparison's relative-depth grid: variables ``floor_*`` over ``(model, readout, depth)``, NaN
for a model with fewer than two controls.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.floor import compare_readouts, readouts
from belieflens.analysis.floor_test import INTERVAL, MIN_CONTROLS, TOLERANCE
from belieflens.dims import LAYER
from belieflens.types import DebiasMethod

READOUT = "readout"
"""The dimension of the read-outs that have floors in a comparison."""

FLOOR_VARS: tuple[str, ...] = ("trained", "floor_mean", "floor_min", "floor_max",
                               "selectivity", "selectivity_low", "selectivity_high")
"""The floor variables a comparison carries (each prefixed ``floor_`` but ``floor_*``)."""

INIT_NAMES = {"random": "untrained", "shuffled": "shuffled"}


def _value(attrs: Mapping[str, Any], key: str, default: object = "") -> str:
    v = attrs.get(key, default)
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0] if v.size else default
    return str(v)


def init_of(attrs: Mapping[str, Any]) -> str:
    """``trained``, ``random`` or ``shuffled``: how a file's weights were set."""
    return _value(attrs, "model_init", "trained")


def control_label(attrs: Mapping[str, Any]) -> str:
    """`` (untrained seed 3)`` for a control file, ``''`` for a trained one."""
    kind = init_of(attrs)
    if kind == "trained":
        return ""
    return f" ({INIT_NAMES.get(kind, kind)} seed {_value(attrs, 'model_init_seed', 0)})"


ARCHITECTURE = ("model_id", "model_n_layers", "model_d_model")
"""The root attributes that name a model's architecture."""


def controls_of(attrs: Sequence[Mapping[str, Any]]) -> dict[int, list[int]]:
    """For each trained file, its control files: every ``random`` control of its
    architecture (an untrained network is drawn from the configuration alone, so it is the
    floor of any model of that shape: a taught adapter's too), and the ``shuffled`` controls
    made from its own weights."""
    out: dict[int, list[int]] = {}
    for i, a in enumerate(attrs):
        if init_of(a) != "trained":
            continue
        mine = [j for j, c in enumerate(attrs) if init_of(c) != "trained"
                and all(_value(c, k) == _value(a, k) for k in ARCHITECTURE)
                and (init_of(c) == "random"
                     or _value(c, "model_base_weights_hash") == _value(a, "weights_hash"))]
        if mine:
            out[i] = mine
    return out


def model_floors(
    paths: Sequence[str | os.PathLike[str]], attrs: Sequence[Mapping[str, Any]],
    names: Sequence[str], depth: np.ndarray, *, method: DebiasMethod, decoders: bool, seed: int,
) -> xr.Dataset | None:
    """The ``floor_*`` variables over ``(model, readout, depth)`` (module docstring), or
    ``None`` where no compared model has a control among the files."""
    from belieflens.store.cache import open_cache

    groups = {i: c for i, c in controls_of(attrs).items() if len(c) >= MIN_CONTROLS}
    if not groups:
        return None
    parts: dict[str, xr.Dataset] = {}
    for i, ctl in groups.items():
        opened = [open_cache(paths[j]) for j in (i, *ctl)]
        try:
            reads = [readouts(ds, method=method, decoders=decoders, seed=seed) for ds in opened]
            n_layers = opened[0].sizes[LAYER]
        finally:
            for ds in opened:
                ds.close()
        f = compare_readouts(reads[0], reads[1:], n_layers=n_layers,
                             control_labels=[names[j] for j in ctl], seed=seed)
        at = np.asarray(np.rint(depth * (n_layers - 1)), dtype=np.int64)
        grid = f[list(FLOOR_VARS)].isel({LAYER: xr.DataArray(at, dims="depth")})
        grid = grid.drop_vars(LAYER).rename({"source": READOUT})
        parts[names[i]] = grid.rename({v: v if v.startswith("floor_") else f"floor_{v}"
                                       for v in FLOOR_VARS})
    model = xr.DataArray(list(parts), dims="model", name="model")
    out = xr.concat(list(parts.values()), dim=model)
    out["floor_exceeds"] = out["floor_selectivity_low"] > TOLERANCE
    out.attrs["floor_interval"] = INTERVAL + " (95%, max-T corrected across layers)"
    return out
