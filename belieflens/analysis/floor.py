"""Every internal read-out beside its floor: the same read-out of untrained controls.

A lens, a linear decoder or a belief geometry that reads the belief from a layer means
something only against what the same read-out gives on a network of the same shape that was
never trained (``--init random:SEED``, :mod:`belieflens.model.init`): at initialisation,
attention averages the token embeddings, and that alone carries much of an evidence count.
:func:`floor` compares a study (the *trained* file) with control files of the same study:

- per source and layer, the **trained** value, each control's value (``control_value``,
  over ``control``), the **floor** (mean,
  min and max over the controls), and the **selectivity**: how far the trained value is
  beyond the floor, signed so that positive is better (R²: trained − floor; a TVD to the
  oracle: floor − trained);
- a **bootstrap interval** of the selectivity over episodes (the files share their
  episodes, so each resample takes the same episodes from every file);
- whether the layer **exceeds its floor beyond the interval** (the interval's low end > 0,
  beyond rounding: :data:`TOLERANCE`).

Sources: ``logit-lens`` and ``decoder`` (TVD to the oracle of the logit-lens and of the
held-out softmax decoder, :func:`~belieflens.analysis.summary.decoder_tvd`, averaged over
deliveries, probes and turns within each episode), and for each geometry target (``geometry:
NAME``) the held-out R² of the shared ridge estimator
(:func:`~belieflens.analysis.geometry.geometry_fits`) per layer and on all layers
concatenated (the ``*_all`` variables). A control must be the same study: same environment,
parameters, seed, episodes and architecture (:func:`check_floor`).

Examples:
    Not run here (the controls come from ``extract ... --init random:0`` and ``random:1``):

    >>> f = belieflens.open_cache("study.h5").bl.floor(["r0.h5", "r1.h5"])  # doctest: +SKIP
    >>> f["selectivity"].dims                                              # doctest: +SKIP
    ('source', 'layer')
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.beliefs import lens_beliefs, output_beliefs
from belieflens.analysis.decoders.estimator import EpisodeSums, episode_sums
from belieflens.analysis.geometry import Target, geometry_fits_many
from belieflens.analysis.summary import DECODER_FOLDS, decoder_tvd
from belieflens.analysis.tables import unpad
from belieflens.dims import EPISODE, LAYER
from belieflens.errors import ParameterError
from belieflens.types import DebiasMethod

F64 = NDArray[np.float64]

FloorMetric = Literal["tvd", "r2"]
"""What a source's value is: a TVD to the oracle (lower is better) or a held-out R²."""

BOOTSTRAP = 1000
"""Resamples of episodes behind each selectivity interval."""

LEVEL = 0.95
"""The intervals' coverage."""

TOLERANCE = 1e-6
"""How far above 0 an interval's low end must be for a layer to exceed its floor: a read-out
that any embedding gives alike (layer 0 of a token model) differs from its floor only by
rounding."""

CONTROL = "control"
SOURCE = "source"

STUDY_KEYS: tuple[tuple[str, str], ...] = (
    ("env_name", "environment"), ("env_params", "parameters"), ("seed", "episodes' seed"),
    ("episodes", "episodes"), ("model_id", "model architecture"),
    ("model_n_layers", "model architecture (layers)"),
    ("model_d_model", "model architecture (width)"),
)
"""Root attributes a control must share with the study, and how a mismatch is named."""


def study_attr(attrs: Mapping[str, Any], key: str) -> object:
    """Root attribute ``key`` of a cache file as compared between files: ``env_params``
    parsed from its JSON, any other value (a one-element array unwrapped) as text."""
    value = attrs.get(key)
    if key == "env_params":
        try:
            return json.loads(str(value))
        except ValueError:
            return str(value)
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0] if value.size == 1 else value.tolist()
    return str(value)


def check_floor(study: Mapping[str, Any], control: Mapping[str, Any], name: str) -> None:
    """One line (:class:`ParameterError`) naming the first way the control file ``name`` is
    not the same study as ``study`` (their root attributes), or is the same model."""
    for key, what in STUDY_KEYS:
        u, v = study_attr(study, key), study_attr(control, key)
        if u != v:
            raise ParameterError(
                f"--floor {name} is another study: its {what} differs ({_short(v)} vs the "
                f"study's {_short(u)}); a floor is the same study from an untrained control "
                "(extract with the same options and --init random:SEED)")
    if study_attr(study, "weights_hash") == study_attr(control, "weights_hash"):
        raise ParameterError(f"--floor {name} has the study's own weights: a floor is an "
                             "untrained control (--init random:SEED)")


def _short(v: object) -> str:
    text = json.dumps(v, sort_keys=True) if isinstance(v, dict) else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, eq=False)
class Readout:
    """One source of one file: per-episode terms whose resampled sums give its value."""

    source: str
    metric: FloorMetric
    total: F64 | None = None
    """TVD sources: Σ TVD per episode and layer ``[episode, layer]``."""
    count: F64 | None = None
    """TVD sources: read-outs per episode and layer ``[episode, layer]``."""
    layers: tuple[EpisodeSums, ...] = ()
    """R² sources: the sums of each layer's fit."""
    concat: EpisodeSums | None = None
    """R² sources: the sums of the fit on all layers concatenated."""

    def values(self, weights: F64) -> F64:
        """The value per layer of episodes weighted ``weights [..., episode]``,
        ``[..., layer]``."""
        if self.metric == "tvd":
            assert self.total is not None and self.count is not None
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.asarray((weights @ self.total) / (weights @ self.count))
        return np.stack([s.r2(weights) for s in self.layers], axis=-1)

    def all_layers(self, weights: F64) -> F64:
        """The all-layers value ``[...]`` (NaN for a source without one)."""
        if self.concat is None:
            return np.full(np.shape(weights)[:-1], np.nan)
        return self.concat.r2(weights)


def _episode_totals(per_instance: xr.DataArray, order: NDArray[Any]) -> tuple[F64, F64]:
    """Σ and count of the finite values of ``(..., episode, ..., layer)`` per episode (in
    ``order``) and layer."""
    da = per_instance.transpose(EPISODE, ..., LAYER)
    vals = np.asarray(da.values, dtype=np.float64)
    vals = vals.reshape(vals.shape[0], -1, vals.shape[-1])
    ok = np.isfinite(vals)
    eps = np.asarray(da[EPISODE].values)
    at = np.searchsorted(order, eps)
    total = np.zeros((order.size, vals.shape[-1]))
    count = np.zeros_like(total)
    total[at] = np.where(ok, vals, 0.0).sum(axis=1)
    count[at] = ok.sum(axis=1)
    return total, count


def readouts(
    ds: xr.Dataset,
    *,
    method: DebiasMethod = "geometric",
    decoders: bool = True,
    seed: int = 0,
    targets: Mapping[str, Target] | None = None,
    decoder_rows: xr.DataArray | None = None,
    logit: xr.DataArray | None = None,
) -> list[Readout]:
    """The read-outs of one file that have a floor: the logit lens and (``decoders``) the
    decoder TVD per episode, and each geometry target's fits (folds from ``seed``).
    ``decoder_rows`` and ``logit``: the file's :func:`decoder_tvd` (seeded by ``seed``) and
    :func:`lens_beliefs`, where the caller has them already."""
    order = np.unique(np.asarray(ds[EPISODE].values))
    beliefs = output_beliefs(ds, method=method)
    oracle, labels = beliefs["oracle"], beliefs["outcome_label"]
    lens = logit if logit is not None else lens_beliefs(ds, method=method)
    from belieflens.analysis.divergence import tvd

    lens_tvd = tvd(unpad(oracle, labels), unpad(lens, labels), dim="outcome")
    out = [Readout("logit-lens", "tvd", *_episode_totals(lens_tvd, order))]
    if decoders:
        rows = decoder_rows if decoder_rows is not None else decoder_tvd(
            ds, np.random.default_rng(seed), n_folds=DECODER_FOLDS)
        out.append(Readout("decoder", "tvd",
                           *_episode_totals(rows.where(lens_tvd.notnull()), order)))
    episodes = np.asarray(ds[EPISODE].values)
    named = dict(targets or {})
    all_fits = geometry_fits_many(ds, np.random.default_rng(seed), targets=list(named.values()),
                                  permutations=0) if named else []
    for name, fits in zip(named, all_fits, strict=True):
        y = fits.target.values
        out.append(Readout(
            f"geometry: {name}", "r2",
            layers=tuple(episode_sums(y, f.pred, episodes, order) for f in fits.layers),
            concat=episode_sums(y, fits.concat.pred, episodes, order)))
    return out


def _labels(attrs: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for a in attrs:
        kind = str(a.get("model_init", "trained"))
        seed = study_attr(a, "model_init_seed")
        name = {"random": "untrained", "shuffled": "shuffled"}.get(kind, kind)
        label = f"{name} seed {seed}" if kind != "trained" else str(a.get("model_spec", "?"))
        while label in out:
            label += "'"
        out.append(label)
    return out


def compare_readouts(
    trained: Sequence[Readout],
    controls: Sequence[Sequence[Readout]],
    *,
    n_layers: int,
    control_labels: Sequence[str],
    n_boot: int = BOOTSTRAP,
    seed: int = 0,
) -> xr.Dataset:
    """The floor Dataset (module docstring) of a file's read-outs against its controls'."""
    n_ep = (trained[0].total.shape[0] if trained[0].total is not None
            else trained[0].layers[0].n.size)
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n_ep, np.full(n_ep, 1.0 / n_ep), size=n_boot).astype(np.float64)
    one = np.ones(n_ep)
    lo_q, hi_q = 100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2
    per: dict[str, list[F64]] = {k: [] for k in (
        "trained", "control_value", "floor_mean", "floor_min", "floor_max", "selectivity",
        "selectivity_low", "selectivity_high")}
    alls: dict[str, list[F64]] = {k: [] for k in per}
    for i, src in enumerate(trained):
        sign = 1.0 if src.metric == "r2" else -1.0
        ctl = [c[i] for c in controls]
        for fn, into in ((Readout.values, per), (Readout.all_layers, alls)):
            t, tb = fn(src, one), fn(src, w)
            c = np.stack([fn(x, one) for x in ctl])
            cb = np.mean([fn(x, w) for x in ctl], axis=0)
            sel_b = sign * (tb - cb)
            into["trained"].append(t)
            into["control_value"].append(c)
            into["floor_mean"].append(c.mean(axis=0))
            into["floor_min"].append(c.min(axis=0))
            into["floor_max"].append(c.max(axis=0))
            into["selectivity"].append(sign * (t - c.mean(axis=0)))
            with np.errstate(invalid="ignore"):
                into["selectivity_low"].append(np.nanpercentile(sel_b, lo_q, axis=0)
                                               if np.isfinite(sel_b).any() else t * np.nan)
                into["selectivity_high"].append(np.nanpercentile(sel_b, hi_q, axis=0)
                                                if np.isfinite(sel_b).any() else t * np.nan)
    return _floor_dataset(trained, per, alls, n_layers, control_labels, n_ep, n_boot)


def _floor_dataset(trained: Sequence[Readout], per: dict[str, list[F64]],
                   alls: dict[str, list[F64]], n_layers: int, labels: Sequence[str],
                   n_ep: int, n_boot: int) -> xr.Dataset:
    data: dict[str, Any] = {}
    for k, v in per.items():
        dims = (SOURCE, CONTROL, LAYER) if k == "control_value" else (SOURCE, LAYER)
        data[k] = (dims, np.stack(v))
        data[f"{k}_all"] = (dims[:-1], np.stack(alls[k]))
    data["exceeds"] = ((SOURCE, LAYER), np.stack(per["selectivity_low"]) > TOLERANCE)
    data["metric"] = ((SOURCE,), np.array([s.metric for s in trained]))
    out = xr.Dataset(data, coords={SOURCE: [s.source for s in trained],
                                   LAYER: np.arange(n_layers), CONTROL: list(labels)})
    out["selectivity"].attrs["description"] = (
        "how far the trained value is beyond the floor (the controls' mean), positive = "
        "better: R2 trained - floor, TVD floor - trained")
    out.attrs.update({"bootstrap": n_boot, "level": LEVEL, "episodes": n_ep,
                      "interval": "percentile bootstrap over episodes, the same resample "
                                  "of episodes in every file"})
    return out


def floor(
    ds: xr.Dataset,
    controls: Sequence[xr.Dataset | str | os.PathLike[str]],
    *,
    method: DebiasMethod = "geometric",
    decoders: bool = True,
    seed: int = 0,
    targets: Mapping[str, Target] | None = None,
    n_boot: int = BOOTSTRAP,
) -> xr.Dataset:
    """The study ``ds`` beside its untrained ``controls`` (files or open Datasets of the
    same study, :func:`check_floor`): the Dataset of the module docstring, dims ``source``,
    ``layer`` and ``control`` (each control's label, e.g. ``untrained seed 0``, with its
    ``seed``). ``targets``: the geometry targets, each a :class:`Target` of ``ds`` (a
    control's is the same target read from the control: its values are the study's)."""
    from belieflens.store.cache import open_cache

    if not controls:
        raise ParameterError("--floor needs at least one control file")
    opened = [(c, False) if isinstance(c, xr.Dataset) else (open_cache(c), True)
              for c in controls]
    try:
        names = [str(c) if not isinstance(c, xr.Dataset) else f"control {i}"
                 for i, c in enumerate(controls)]
        for (c, _), name in zip(opened, names, strict=True):
            check_floor(ds.attrs, c.attrs, name)
        mine = readouts(ds, method=method, decoders=decoders, seed=seed, targets=targets)
        theirs = [readouts(c, method=method, decoders=decoders, seed=seed, targets=targets)
                  for c, _ in opened]
        labels = _labels([c.attrs for c, _ in opened])
        out = compare_readouts(mine, theirs, n_layers=ds.sizes[LAYER], control_labels=labels,
                               n_boot=n_boot, seed=seed)
        seeds = [int(np.asarray(c.attrs.get("model_init_seed", -1)).reshape(-1)[0])
                 for c, _ in opened]
        return out.assign_coords({"seed": (CONTROL, seeds),
                                  "init": (CONTROL, [str(c.attrs.get("model_init", "trained"))
                                                     for c, _ in opened])})
    finally:
        for c, mine_to_close in opened:
            if mine_to_close:
                c.close()


def _span(layers: NDArray[Any]) -> str:
    """``3-7, 9``: a sorted set of layers as runs."""
    runs: list[str] = []
    start = prev = None
    for la in [int(x) for x in layers]:
        if start is None:
            start = prev = la
        elif la == prev + 1:  # type: ignore[operator]
            prev = la
        else:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = la
    if start is not None:
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(runs)


def verdicts(f: xr.Dataset) -> list[str]:
    """One line per source: whether any layer exceeds its floor beyond the interval."""
    lines = []
    for src in f[SOURCE].values:
        s = f.sel({SOURCE: src})
        metric = str(s["metric"].values)
        what = "TVD to the oracle" if metric == "tvd" else "held-out R2"
        sel = np.asarray(s["selectivity"].values)
        best = int(np.nanargmax(sel)) if np.isfinite(sel).any() else 0
        at = s.isel({LAYER: best})
        best_text = (f"best layer {best}: {float(at.trained):.4f} vs floor "
                     f"{float(at.floor_mean):.4f}, selectivity {float(at.selectivity):+.4f} "
                     f"[{float(at.selectivity_low):+.4f}, {float(at.selectivity_high):+.4f}]")
        above = np.flatnonzero(np.asarray(s["exceeds"].values))
        if above.size:
            head = (f"{src} ({what}): beyond its floor at {above.size} of {sel.size} layers "
                    f"({_span(above)}); {best_text}")
        else:
            head = f"{src} ({what}): no layer beyond its floor; {best_text}"
        if np.isfinite(float(s["trained_all"])):
            head += (f"; all layers {float(s.trained_all):.4f} vs floor "
                     f"{float(s.floor_mean_all):.4f}, selectivity "
                     f"{float(s.selectivity_all):+.4f} [{float(s.selectivity_low_all):+.4f}, "
                     f"{float(s.selectivity_high_all):+.4f}]")
        lines.append(head)
    return lines


def format_floor(f: xr.Dataset) -> str:
    """The floor as text: the verdict per source, then per source and layer the trained
    value, the floor's mean [min, max] and the selectivity [interval]."""
    labels = ", ".join(str(c) for c in f[CONTROL].values)
    lines = [f"floors: {f.sizes[CONTROL]} controls ({labels}); selectivity = beyond the floor, "
             f"positive = better; {int(f.attrs['level'] * 100)}% bootstrap interval over "
             f"{f.attrs['episodes']} episodes", *verdicts(f), ""]
    for src in f[SOURCE].values:
        s = f.sel({SOURCE: src})
        lines.append(f"{src}  ({'TVD' if str(s.metric.values) == 'tvd' else 'R2'})")
        lines.append("layer   trained     floor [min, max]            selectivity [interval]")
        keys = ("trained", "floor_mean", "floor_min", "floor_max", "selectivity",
                "selectivity_low", "selectivity_high")
        rows = [(str(int(la)), [float(s[k].sel({LAYER: la})) for k in keys])
                for la in f[LAYER].values]
        if np.isfinite(float(s["trained_all"])):
            rows.append(("all", [float(s[f"{k}_all"]) for k in keys]))
        for name, (t, fm, fmin, fmax, sel, lo, hi) in rows:
            mark = " *" if lo > TOLERANCE else ""
            lines.append(f"{name:>5} {t:9.4f} {fm:9.4f} [{fmin:.4f}, {fmax:.4f}] "
                         f"{sel:+9.4f} [{lo:+.4f}, {hi:+.4f}]{mark}")
        lines.append("")
    lines.append("* the interval excludes 0: beyond the floor")
    return "\n".join(lines)


def check_floors(study: Mapping[str, Any], paths: Sequence[str | os.PathLike[str]]) -> None:
    """Each control file of ``paths`` exists, opens and is the study's (:func:`check_floor`);
    else one line. Only the files' attributes are read."""
    from belieflens.store.cache import open_cache

    for p in paths:
        if not Path(p).exists():
            raise ParameterError(f"option '--floor' = '{p}' is not allowed: no such file")
        with open_cache(p) as c:
            check_floor(study, c.attrs, os.fspath(p))
