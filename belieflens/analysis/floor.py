"""Every internal read-out beside its floor: the same read-out of untrained controls, and
statistic baselines.

A lens, a linear decoder or a belief geometry that reads the belief from a layer means
something only against what the same read-out gives on a network of the same shape that was
never trained (``--init random:SEED``, :mod:`belieflens.model.init`): at initialisation,
attention averages the token embeddings, and that alone carries much of an evidence count.
It means something only against what a statistic of the evidence gives, too: a fit of the
same target, with the same folds and estimator, on features the environment declares (the
coin flip's counts, the turn, the last ``k`` observations:
:mod:`belieflens.analysis.baselines`). :func:`floor` compares a study (the *trained* file)
with control files of the same study and with those baselines:

- per source and layer, the **trained** value, each control's value (``control_value``,
  over ``control``), the **floor** (mean, min and max over the controls), each statistic
  baseline's value (``baseline_value``, over ``baseline``; a baseline reads no layer) and
  the best of them (``baseline_best``);
- the **selectivity** against each: ``selectivity_floor`` (beyond the floor's mean) and
  ``selectivity_baseline`` (beyond the best baseline), signed so that positive is better
  (R²: trained − reference; a TVD to the oracle: reference − trained), each with its
  interval (``*_low``, ``*_high``), and ``selectivity``, against the larger of the two
  (the lower of the two selectivities, the interval's ends the lower of theirs);
- whether each layer is **beyond** its reference: ``exceeds_floor``, ``exceeds_baseline``,
  and ``exceeds`` (beyond both: the larger of the two).

The intervals (:mod:`belieflens.analysis.floor_test`) cover the resampling of episodes (the
same resample in every file) and, against the floor, the spread from one untrained seed to
the next; they hold over all layers of a source at once (max-T correction), so a layer is
flagged where nothing differs in at most 5% of studies however many layers there are.

Sources: ``logit-lens`` and ``decoder`` (TVD to the oracle of the logit-lens and of the
held-out decoder, :func:`~belieflens.analysis.summary.decoder_tvd`, averaged over
deliveries, probes and turns within each episode), and for each geometry target (``geometry:
NAME``) the held-out R² of the shared ridge estimator
(:func:`~belieflens.analysis.geometry.geometry_fits`) per layer and on all layers
concatenated (the ``*_all`` variables). A control must be the same study: same environment,
parameters, seed, episodes and architecture (:func:`check_floor`); at least
:data:`~belieflens.analysis.floor_test.MIN_CONTROLS` controls, and enough episodes for the
folds and the bootstrap (:func:`min_episodes`).

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

from belieflens.analysis.baselines import Statistics, baseline_fits, baseline_tvd
from belieflens.analysis.beliefs import lens_beliefs, output_beliefs
from belieflens.analysis.decoders.estimator import EpisodeSums, episode_sums
from belieflens.analysis.floor_test import (
    CORRECTION,
    INTERVAL,
    LEVEL,
    MIN_CONTROLS,
    Beyond,
    beyond_floor,
    beyond_value,
    min_bootstrap_episodes,
)
from belieflens.analysis.geometry import Target, geometry_fits_many
from belieflens.analysis.summary import DECODER_FOLDS, decoder_tvd
from belieflens.analysis.tables import unpad
from belieflens.dims import BASELINE, EPISODE, LAYER
from belieflens.errors import ParameterError
from belieflens.types import DebiasMethod

F64 = NDArray[np.float64]

FloorMetric = Literal["tvd", "r2"]
"""What a source's value is: a TVD to the oracle (lower is better) or a held-out R²."""

BOOTSTRAP = 1000
"""Bootstrap replicates behind each selectivity interval."""

GEOMETRY_FOLDS = 5
"""Folds of whole episodes of the geometry targets' fits
(:func:`~belieflens.analysis.geometry.geometry_fits`' default)."""

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


def study_difference(study: Mapping[str, Any], other: Mapping[str, Any]
                     ) -> tuple[str, str, str] | None:
    """The first way ``other`` (a file's root attributes) is not the study ``study`` is, as
    ``(what, other's value, the study's value)`` shortened for a message, or ``None``."""
    for key, what in STUDY_KEYS:
        u, v = study_attr(study, key), study_attr(other, key)
        if key == "env_params" and _same_but_newer(u, v, study, other):
            continue
        if u != v:
            return what, _short(v), _short(u)
    return None


def _same_but_newer(u: object, v: object, study: Mapping[str, Any],
                    other: Mapping[str, Any]) -> bool:
    """Whether two files' environment parameters differ only by parameters one of them does
    not record (it was written before they existed) while every prompt they rendered is the
    same (equal ``queries_sha256`` in their study records): then the missing parameters had
    the values that render those prompts, and the files are one study."""
    if not (isinstance(u, dict) and isinstance(v, dict)) or u == v:
        return False
    shared = u.keys() & v.keys()
    if any(u[k] != v[k] for k in shared):
        return False
    hashes = [_queries_sha256(a) for a in (study, other)]
    return hashes[0] is not None and hashes[0] == hashes[1]


def _queries_sha256(attrs: Mapping[str, Any]) -> str | None:
    try:
        found = json.loads(str(attrs.get("study", ""))).get("queries_sha256")
    except (ValueError, AttributeError):
        return None
    return str(found) if found else None


def check_floor(study: Mapping[str, Any], control: Mapping[str, Any], name: str) -> None:
    """One line (:class:`ParameterError`) naming the first way the control file ``name`` is
    not the same study as ``study`` (their root attributes), or is the same model."""
    differs = study_difference(study, control)
    if differs is not None:
        what, theirs, ours = differs
        raise ParameterError(
            f"--floor {name} is another study: its {what} differs ({theirs} vs the "
            f"study's {ours}); a floor is the same study from an untrained control "
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
    baselines: tuple[Readout, ...] = ()
    """The statistic baselines of the same target (each a readout of one layer, named by
    its ``source``), fitted on the same folds; the study's readouts only."""

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


def episode_totals(per_instance: xr.DataArray, order: NDArray[Any]) -> tuple[F64, F64]:
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


def _tvd_baselines(ds: xr.Dataset, statistics: Statistics, seed: int, mask: xr.DataArray,
                   order: NDArray[Any]) -> tuple[Readout, ...]:
    """Each statistic baseline's TVD to the oracle per episode, fitted on the decoders' folds
    (:func:`~belieflens.analysis.baselines.baseline_tvd` from ``seed``), where ``mask``
    holds a value."""
    b = baseline_tvd(ds, statistics, np.random.default_rng(seed), n_folds=DECODER_FOLDS)
    out = []
    for name in b[BASELINE].values:
        one = b.sel({BASELINE: name}, drop=True).where(mask.isel({LAYER: 0}, drop=True).notnull())
        out.append(Readout(str(name), "tvd", *episode_totals(one.expand_dims(LAYER, -1),
                                                                order)))
    return tuple(out)


def readouts(
    ds: xr.Dataset,
    *,
    method: DebiasMethod = "geometric",
    decoders: bool = True,
    seed: int = 0,
    targets: Mapping[str, Target] | None = None,
    decoder_rows: xr.DataArray | None = None,
    logit: xr.DataArray | None = None,
    statistics: Statistics | None = None,
) -> list[Readout]:
    """The read-outs of one file that have a floor: the logit lens and (``decoders``) the
    decoder TVD per episode, and each geometry target's fits (folds from ``seed``).
    ``decoder_rows`` and ``logit``: the file's :func:`decoder_tvd` (seeded by ``seed``) and
    :func:`lens_beliefs`, where the caller has them already. ``statistics``: the statistic
    baselines' features (the study's; its controls share them), fitted beside every source
    on its own target and folds."""
    order = np.unique(np.asarray(ds[EPISODE].values))
    beliefs = output_beliefs(ds, method=method)
    oracle, labels = beliefs["oracle"], beliefs["outcome_label"]
    lens = logit if logit is not None else lens_beliefs(ds, method=method)
    from belieflens.analysis.divergence import tvd

    lens_tvd = tvd(unpad(oracle, labels), unpad(lens, labels), dim="outcome")
    base = (_tvd_baselines(ds, statistics, seed, lens_tvd, order) if statistics else ())
    out = [Readout("logit-lens", "tvd", *episode_totals(lens_tvd, order), baselines=base)]
    if decoders:
        rows = decoder_rows if decoder_rows is not None else decoder_tvd(
            ds, np.random.default_rng(seed), n_folds=DECODER_FOLDS)
        out.append(Readout("decoder", "tvd",
                           *episode_totals(rows.where(lens_tvd.notnull()), order),
                           baselines=base))
    episodes = np.asarray(ds[EPISODE].values)
    named = dict(targets or {})
    all_fits = geometry_fits_many(ds, np.random.default_rng(seed), targets=list(named.values()),
                                  n_folds=GEOMETRY_FOLDS, permutations=0) if named else []
    for name, fits in zip(named, all_fits, strict=True):
        y = fits.target.values
        stat = baseline_fits(statistics, y, fits.folds) if statistics else {}
        out.append(Readout(
            f"geometry: {name}", "r2",
            layers=tuple(episode_sums(y, f.pred, episodes, order) for f in fits.layers),
            concat=episode_sums(y, fits.concat.pred, episodes, order),
            baselines=tuple(Readout(k, "r2", layers=(episode_sums(y, v.pred, episodes, order),))
                            for k, v in stat.items())))
    return out


def control_names(attrs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each control file's label from its root attributes (``untrained seed 0``), made
    unique."""
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


@dataclass(frozen=True)
class _Reads:
    """One source's values on all episodes and on each bootstrap replicate: ``[layer]`` and
    ``[replicate, layer]`` (the all-layers value: one layer)."""

    trained: F64
    trained_boot: F64
    controls: F64
    """``[control, layer]``."""
    controls_boot: F64
    """``[control, replicate, layer]``."""
    baselines: F64
    """``[baseline, 1]``."""
    baselines_boot: F64
    """``[baseline, replicate, 1]``."""


def _reads(src: Readout, ctl: Sequence[Readout], w: F64, all_layers: bool) -> _Reads:
    """A source's values (per layer, or ``all_layers`` concatenated) on all episodes and on
    the replicates' episode weights ``w [replicate, episode]``."""
    one = np.ones(w.shape[1])

    def get(r: Readout, weights: F64) -> F64:
        return r.all_layers(weights)[..., None] if all_layers else r.values(weights)

    def base(r: Readout, weights: F64) -> F64:
        return r.values(weights)[..., :1]

    k = len(src.baselines)
    return _Reads(
        trained=get(src, one), trained_boot=get(src, w),
        controls=np.stack([get(c, one) for c in ctl]),
        controls_boot=np.stack([get(c, w) for c in ctl]),
        baselines=(np.stack([base(b, one) for b in src.baselines]) if k
                   else np.zeros((0, 1))),
        baselines_boot=(np.stack([base(b, w) for b in src.baselines]) if k
                        else np.zeros((0, w.shape[0], 1))))


@dataclass(frozen=True)
class _Compared:
    """One source's comparison (per layer, or all layers concatenated)."""

    reads: _Reads
    floor: Beyond
    baseline: Beyond | None
    best: int
    """The best baseline's index (-1: none)."""


def _compare(src: Readout, ctl: Sequence[Readout], w: F64, rng: np.random.Generator,
             all_layers: bool) -> _Compared:
    sign = 1.0 if src.metric == "r2" else -1.0
    r = _reads(src, ctl, w, all_layers)
    fl = beyond_floor(r.trained, r.trained_boot, r.controls, r.controls_boot, rng, sign=sign)
    if r.baselines.shape[0] == 0 or not np.isfinite(r.baselines).any():
        return _Compared(r, fl, None, -1)
    score = sign * np.where(np.isfinite(r.baselines[:, 0]), r.baselines[:, 0], -sign * np.inf)
    best = int(np.argmax(score))
    n = r.trained.shape[-1]
    bl = beyond_value(r.trained, r.trained_boot, np.repeat(r.baselines[best], n),
                      np.repeat(r.baselines_boot[best], n, axis=-1), sign=sign)
    return _Compared(r, fl, bl, best)


def _columns(c: _Compared, sign: float) -> dict[str, F64]:
    """A comparison's variables (module docstring), each ``[layer]`` (``control_value``:
    ``[control, layer]``; ``baseline_value``: ``[baseline]``)."""
    r, fl, bl = c.reads, c.floor, c.baseline
    nan = np.full_like(r.trained, np.nan)
    out = {"trained": r.trained, "control_value": r.controls,
           "floor_mean": r.controls.mean(axis=0), "floor_min": r.controls.min(axis=0),
           "floor_max": r.controls.max(axis=0), "baseline_value": r.baselines[:, 0],
           "selectivity_floor": fl.selectivity, "selectivity_floor_low": fl.low,
           "selectivity_floor_high": fl.high, "exceeds_floor": fl.exceeds.astype(np.float64)}
    if bl is None:
        out.update({"selectivity_baseline": nan, "selectivity_baseline_low": nan,
                    "selectivity_baseline_high": nan, "exceeds_baseline": nan,
                    "selectivity": fl.selectivity, "selectivity_low": fl.low,
                    "selectivity_high": fl.high, "exceeds": fl.exceeds.astype(np.float64),
                    "reference": out["floor_mean"]})
        return out
    best = np.full_like(r.trained, r.baselines[c.best, 0])
    harder = (np.maximum if sign > 0 else np.minimum)(out["floor_mean"], best)
    out.update({"selectivity_baseline": bl.selectivity, "selectivity_baseline_low": bl.low,
                "selectivity_baseline_high": bl.high,
                "exceeds_baseline": bl.exceeds.astype(np.float64),
                "selectivity": np.fmin(fl.selectivity, bl.selectivity),
                "selectivity_low": np.fmin(fl.low, bl.low),
                "selectivity_high": np.fmin(fl.high, bl.high),
                "exceeds": (fl.exceeds & bl.exceeds).astype(np.float64), "reference": harder})
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
    """The floor Dataset (module docstring) of a file's read-outs against its controls' (at
    least :data:`~belieflens.analysis.floor_test.MIN_CONTROLS`) and its read-outs' statistic
    baselines."""
    if len(controls) < MIN_CONTROLS:
        raise ParameterError(f"a floor needs at least {MIN_CONTROLS} untrained controls "
                             f"(their spread is the seeds' part of every interval), got "
                             f"{len(controls)}: extract more with --init random:SEED")
    n_ep = (trained[0].total.shape[0] if trained[0].total is not None
            else trained[0].layers[0].n.size)
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n_ep, np.full(n_ep, 1.0 / n_ep), size=n_boot).astype(np.float64)
    per: list[dict[str, F64]] = []
    alls: list[dict[str, F64]] = []
    crit: list[tuple[float, float]] = []
    best: list[str] = []
    for i, src in enumerate(trained):
        sign = 1.0 if src.metric == "r2" else -1.0
        ctl = [c[i] for c in controls]
        layer, every = (_compare(src, ctl, w, rng, all_layers=a) for a in (False, True))
        per.append(_columns(layer, sign))
        alls.append({k: v[..., 0] if k != "baseline_value" else v
                     for k, v in _columns(every, sign).items()})
        crit.append((layer.floor.critical,
                     layer.baseline.critical if layer.baseline is not None else np.nan))
        best.append(src.baselines[layer.best].source if layer.best >= 0 else "")
    names = [b.source for b in trained[0].baselines] if trained else []
    return _floor_dataset(trained, per, alls, crit, best, names, n_layers, control_labels,
                          n_ep, n_boot)


def _floor_dataset(trained: Sequence[Readout], per: Sequence[dict[str, F64]],
                   alls: Sequence[dict[str, F64]], crit: Sequence[tuple[float, float]],
                   best: Sequence[str], baselines: Sequence[str], n_layers: int,
                   labels: Sequence[str], n_ep: int, n_boot: int) -> xr.Dataset:
    data: dict[str, Any] = {}
    for k in per[0]:
        if k == "baseline_value":
            data[k] = ((SOURCE, BASELINE), np.stack([p[k] for p in per]).reshape(
                len(per), len(baselines)))
            continue
        dims = (SOURCE, CONTROL, LAYER) if k == "control_value" else (SOURCE, LAYER)
        flag = k.startswith("exceeds")
        stacked, every = np.stack([p[k] for p in per]), np.stack([a[k] for a in alls])
        data[k] = (dims, stacked == 1.0 if flag else stacked)
        data[f"{k}_all"] = (dims[:-1], every == 1.0 if flag else every)
    data["metric"] = ((SOURCE,), np.array([s.metric for s in trained]))
    data["baseline_best"] = ((SOURCE,), np.array(best, dtype=object).astype(str))
    data["critical_floor"] = ((SOURCE,), np.array([c[0] for c in crit]))
    data["critical_baseline"] = ((SOURCE,), np.array([c[1] for c in crit]))
    out = xr.Dataset(data, coords={SOURCE: [s.source for s in trained],
                                   LAYER: np.arange(n_layers), CONTROL: list(labels),
                                   BASELINE: list(baselines)})
    out["selectivity"].attrs["description"] = (
        "how far the trained value is beyond the larger of the floor (the controls' mean) and "
        "the best statistic baseline, positive = better: R2 trained - reference, TVD "
        "reference - trained")
    out.attrs.update({"bootstrap": n_boot, "level": LEVEL, "episodes": n_ep,
                      "interval": INTERVAL, "correction": CORRECTION})
    return out


def min_episodes(n_boot: int = BOOTSTRAP, *, geometry: bool = True) -> int:
    """The fewest episodes a floor comparison takes: as many as the bootstrap's replicates
    need to be distinct (:func:`~belieflens.analysis.floor_test.min_bootstrap_episodes`), and
    at least one per fold (``geometry``: the geometry's :data:`GEOMETRY_FOLDS`; the decoders
    take up to :data:`~belieflens.analysis.summary.DECODER_FOLDS` and no fewer than 3)."""
    from belieflens.analysis.summary import MIN_DECODER_EPISODES

    folds = GEOMETRY_FOLDS if geometry else MIN_DECODER_EPISODES
    return max(min_bootstrap_episodes(n_boot), folds)


def check_episodes(n_episodes: int, n_boot: int = BOOTSTRAP, *, geometry: bool = True) -> None:
    """One line (:class:`ParameterError`) giving the minimum where a study has too few
    episodes for a floor comparison (:func:`min_episodes`)."""
    least = min_episodes(n_boot, geometry=geometry)
    if n_episodes < least:
        raise ParameterError(
            f"a floor comparison needs at least {least} episodes ({n_boot} bootstrap "
            f"replicates need {min_bootstrap_episodes(n_boot)} to be distinct, the fits "
            f"{GEOMETRY_FOLDS if geometry else 3} folds of whole episodes); this study has "
            f"{n_episodes}: extract the study and its controls with --episodes "
            f"{max(least, 24)}")


def floor(
    ds: xr.Dataset,
    controls: Sequence[xr.Dataset | str | os.PathLike[str]],
    *,
    method: DebiasMethod = "geometric",
    decoders: bool = True,
    seed: int = 0,
    targets: Mapping[str, Target] | None = None,
    n_boot: int = BOOTSTRAP,
    statistics: Statistics | None = None,
    decoder_rows: xr.DataArray | None = None,
) -> xr.Dataset:
    """The study ``ds`` beside its untrained ``controls`` (files or open Datasets of the
    same study, :func:`check_floor`, at least
    :data:`~belieflens.analysis.floor_test.MIN_CONTROLS`) and its statistic baselines: the
    Dataset of the module docstring, dims ``source``, ``layer``, ``control`` (each control's
    label, e.g. ``untrained seed 0``, with its ``seed``) and ``baseline``. ``targets``: the
    geometry targets, each a :class:`Target` of ``ds`` (a control's is the same target read
    from the control: its values are the study's). ``statistics``: the statistic baselines'
    features (``belieflens.envs.statistic_features(ds)``; none: no baselines).
    ``decoder_rows``: the study's :func:`decoder_tvd` from ``seed``, where the caller has it.
    Too few episodes or controls is one line (:func:`check_episodes`)."""
    from belieflens.store.cache import open_cache

    if len(controls) < MIN_CONTROLS:
        raise ParameterError(f"--floor needs at least {MIN_CONTROLS} control files (their "
                             f"spread is the seeds' part of every interval), got "
                             f"{len(controls)}")
    check_episodes(int(np.unique(np.asarray(ds[EPISODE].values)).size), n_boot,
                   geometry=bool(targets))
    opened = [(c, False) if isinstance(c, xr.Dataset) else (open_cache(c), True)
              for c in controls]
    try:
        names = [str(c) if not isinstance(c, xr.Dataset) else f"control {i}"
                 for i, c in enumerate(controls)]
        for (c, _), name in zip(opened, names, strict=True):
            check_floor(ds.attrs, c.attrs, name)
        mine = readouts(ds, method=method, decoders=decoders, seed=seed, targets=targets,
                        statistics=statistics, decoder_rows=decoder_rows)
        theirs = [readouts(c, method=method, decoders=decoders, seed=seed, targets=targets)
                  for c, _ in opened]
        labels = control_names([c.attrs for c, _ in opened])
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


def check_floors(study: Mapping[str, Any], paths: Sequence[str | os.PathLike[str]], *,
                 geometry: bool = True) -> None:
    """Each control file of ``paths`` exists, opens and is the study's (:func:`check_floor`),
    there are at least :data:`~belieflens.analysis.floor_test.MIN_CONTROLS` of them and the
    study has enough episodes (:func:`check_episodes`); else one line. Only the files'
    attributes are read."""
    from belieflens.store.cache import cache_attrs

    if not paths:
        return
    for p in paths:
        if not Path(p).exists():
            raise ParameterError(f"option '--floor' = '{p}' is not allowed: no such file")
        check_floor(study, cache_attrs(p), os.fspath(p))
    if len(paths) < MIN_CONTROLS:
        raise ParameterError(f"--floor needs at least {MIN_CONTROLS} control files (their "
                             f"spread is the seeds' part of every interval), got {len(paths)}")
    check_episodes(int(str(study_attr(study, "episodes"))), geometry=geometry)
