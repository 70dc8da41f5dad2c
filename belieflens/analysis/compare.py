"""Several models on one study: one Dataset with a ``model`` dimension, a report and plots.

:func:`compare` takes cache files (or study directories) of the *same study* (environment,
parameters, seed and episodes) extracted from different models and returns one
:class:`xarray.Dataset` over ``model``:

- ``output_tvd_mean`` / ``output_tvd_sem`` ``(model, delivery, probe, turn)``: TVD of the
  model's debiased output belief to the oracle (mean ± SEM over episodes), with the point
  estimates ``estimate_mean`` and ``oracle_estimate_mean``.
- ``tvd_mean`` / ``tvd_sem`` ``(model, delivery, probe, turn, depth, source)``: the summary of
  :func:`belieflens.analysis.summary` (sources ``output``, ``logit-lens``, ``probe``) on a
  common grid of **relative depth** ``depth`` in [0, 1] (layer / number of blocks; 0 = the
  embeddings, 1 = the last block's output). Models of different depths are aligned there:
  each grid point takes the model's nearest layer, whose own index is kept in the coordinate
  ``layer (model, depth)``. The grid has as many points as the deepest model has layers, so
  that model is shown layer for layer.
- ``best_depth``, ``best_layer``, ``best_tvd`` ``(model, delivery, probe, source)`` for the
  logit lens and the probe: the layer (on the model's own layers, not the grid) whose TVD to
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
  (model)``: what each model is and where it came from.

:func:`compare_report` adds the text tables, the figures and ``compare.md`` (``belieflens
compare FILE... --out DIR``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs, point_estimates
from belieflens.analysis.plots import _pyplot
from belieflens.analysis.position_bias import position_bias
from belieflens.analysis.report import Analysis
from belieflens.analysis.summary import summary
from belieflens.analysis.tables import turn_table
from belieflens.dims import EPISODE, LAYER, TURN
from belieflens.errors import ParameterError
from belieflens.types import DebiasMethod

MODEL = "model"
DEPTH = "depth"
SOURCE = "source"

COMPARED_SOURCES: tuple[str, ...] = ("output", "logit-lens", "probe")
"""The read-outs compared across models (a tuned lens belongs to one model: not compared)."""

LAYER_SOURCES: tuple[str, ...] = ("logit-lens", "probe")
"""The read-outs that have a value per layer, for which the closest depth is found."""

STUDY_KEYS: tuple[str, ...] = ("env_name", "env_params", "seed", "episodes")
"""Root attributes that must be equal for files to be one study."""

CacheLike = str | os.PathLike[str]


def _study_key(attrs: dict[str, Any], key: str) -> object:
    value = attrs.get(key)
    if key == "env_params":
        try:
            return json.loads(str(value))
        except ValueError:
            return value
    return str(value)


def check_same_study(files: Sequence[CacheLike], attrs: Sequence[dict[str, Any]]) -> None:
    """One line (:class:`ParameterError`) unless every file is the same study from a
    different model: same environment, parameters, seed and episodes, different weights."""
    if len(files) < 2:
        raise ParameterError("compare needs at least two cache files (one per model)")
    first = attrs[0]
    for f, a in zip(files[1:], attrs[1:], strict=True):
        for key in STUDY_KEYS:
            u, v = _study_key(first, key), _study_key(a, key)
            if u != v:
                raise ParameterError(
                    f"{os.fspath(files[0])} and {os.fspath(f)} are different studies ({key} "
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


def model_names(attrs: Sequence[dict[str, Any]]) -> list[str]:
    """The ``model`` coordinate: each file's model spec (a path's last part), made unique."""
    names: list[str] = []
    for a in attrs:
        spec = str(a.get("model_spec") or a.get("model_id") or "model")
        base = Path(spec).name if ("/" in spec and Path(spec).exists()) else spec
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
    ds: xr.Dataset, depth: np.ndarray, *, method: DebiasMethod, probes: bool, seed: int
) -> xr.Dataset:
    """One file's part of :func:`compare` (no ``model`` dimension yet)."""
    n_blocks = ds.sizes[LAYER] - 1
    beliefs = output_beliefs(ds, method=method)
    table = turn_table(beliefs)
    summ = summary(ds, None, method=method, probes=probes, seed=seed)
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


def compare(
    files: Sequence[CacheLike],
    *,
    method: DebiasMethod = "geometric",
    probes: bool = True,
    seed: int = 0,
) -> xr.Dataset:
    """One Dataset with a ``model`` dimension over cache files (or study directories) of the
    same study from different models; variables in the module docstring.

    Files of different studies (environment, parameters, seed or episodes) or two files of
    the same model are refused in one line (:class:`ParameterError`) before any analysis.
    ``probes=False`` skips the linear probes (their values are NaN); ``seed`` seeds their
    folds. Files are analysed one at a time.
    """
    from belieflens.store.study import open_cache

    paths = list(files)
    attrs: list[dict[str, Any]] = []
    for f in paths:
        ds = open_cache(f)
        try:
            attrs.append(dict(ds.attrs))
            attrs[-1]["_n_layers"] = ds.sizes[LAYER] - 1
        finally:
            ds.close()
    check_same_study(paths, attrs)
    names = model_names(attrs)
    depth = depth_grid([int(a["_n_layers"]) for a in attrs])
    parts = []
    for f in paths:
        ds = open_cache(f)
        try:
            parts.append(_one_model(ds, depth, method=method, probes=probes, seed=seed))
        finally:
            ds.close()
    out = xr.concat(parts, dim=xr.DataArray(names, dims=MODEL, name=MODEL), join="outer",
                    coords="different", compat="equals")
    out = out.assign_coords({DEPTH: depth})
    out["layer"].attrs["description"] = "the model's own layer at each relative depth"
    out["model_id"] = (MODEL, [str(a.get("model_id", "")) for a in attrs])
    out["weights_hash"] = (MODEL, [str(a.get("weights_hash", "")) for a in attrs])
    out["source_file"] = (MODEL, [os.fspath(f) for f in paths])
    first = attrs[0]
    out.attrs.update({
        "env_name": str(first.get("env_name")),
        "env_params": str(first.get("env_params")),
        "seed": str(first.get("seed")),
        "episodes": str(first.get("episodes")),
        "debias": method,
        "probes": int(probes),
        "probe_seed": seed,
        "depth": "layer / number of blocks (0 = embeddings, 1 = last block's output); each "
                 "grid point takes the model's nearest layer",
        "slope": "least squares through the origin of the change of the model's point "
                 "estimate per turn on the oracle's change; standard error clustered by "
                 "episode (CR1)",
    })
    return out


# ----------------------------------------------------------------------------- text


def _pm(m: float, s: float) -> str:
    if not np.isfinite(m):
        return "-"
    return f"{m:.3f}" if not np.isfinite(s) else f"{m:.3f}±{s:.3f}"


def _cells(cmp: xr.Dataset) -> list[tuple[str, str]]:
    """The (delivery, probe) pairs that have an output value for some model."""
    tv = cmp["output_tvd_mean"]
    return [(str(d), str(p)) for d in tv["delivery"].values for p in tv["probe"].values
            if not bool(tv.sel(delivery=d, probe=p).isnull().all())]


def format_compare(cmp: xr.Dataset) -> str:
    """Plain-text tables of :func:`compare`: one block per (delivery, probe), a row per model."""
    lines: list[str] = []
    head = (f"  {'model':<22}{'blocks':>7}  {'output TVD':>12}  {'lens: depth (layer) TVD':>26}"
            f"  {'probe: depth (layer) TVD':>26}  {'updating slope':>15}  {'rot. TVD':>8}")
    for d, p in _cells(cmp):
        lines.append(f"{d} / {p}: mean over turns; slope ± clustered SE; rotation TVD = "
                     "position bias")
        lines.append(head)
        for m in cmp[MODEL].values:
            sub = cmp.sel({MODEL: m, "delivery": d, "probe": p})
            out_m = float(sub["output_tvd_mean"].mean(skipna=True))
            out_s = float(np.sqrt((sub["output_tvd_sem"] ** 2).mean(skipna=True)))
            best = []
            for s in LAYER_SOURCES:
                b = sub.sel({SOURCE: s})
                if np.isfinite(float(b["best_tvd"])):
                    best.append(f"{float(b['best_depth']):.2f} ({int(b['best_layer'])}) "
                                f"{float(b['best_tvd']):.3f}")
                else:
                    best.append("-")
            slope = _pm(float(sub["slope"]), float(sub["slope_se"]))
            rot = float(sub["rotation_tvd_mean"].mean(skipna=True))
            lines.append(
                f"  {m!s:<22}{int(cmp['n_layers'].sel({MODEL: m})):>7}  "
                f"{_pm(out_m, out_s):>12}  {best[0]:>26}  {best[1]:>26}  {slope:>15}  "
                f"{'-' if not np.isfinite(rot) else f'{rot:.3f}':>8}"
            )
        lines.append("")
    return "\n".join(lines)


def format_turns(cmp: xr.Dataset) -> str:
    """Output TVD to the oracle per model and turn, one block per (delivery, probe)."""
    lines: list[str] = []
    turns = [int(t) for t in cmp[TURN].values]
    for d, p in _cells(cmp):
        lines.append(f"{d} / {p}: output TVD to oracle per turn (mean over episodes)")
        lines.append(f"  {'model':<22}" + "".join(f"{t:>7}" for t in turns))
        for m in cmp[MODEL].values:
            v = cmp["output_tvd_mean"].sel({MODEL: m, "delivery": d, "probe": p}).values
            lines.append(f"  {m!s:<22}" + "".join(
                f"{'-' if not np.isfinite(x) else f'{x:.3f}':>7}" for x in v))
        lines.append("")
    return "\n".join(lines)


def headline(cmp: xr.Dataset) -> str:
    """One line per (delivery, probe): the model closest to the oracle and the slopes."""
    parts = []
    for d, p in _cells(cmp):
        sub = cmp.sel(delivery=d, probe=p)
        tv = sub["output_tvd_mean"].mean(TURN, skipna=True)
        best = str(tv.idxmin(MODEL).values)
        slope, se = sub["slope"], sub["slope_se"]
        slopes = ", ".join(
            f"{m} {_pm(float(slope.sel({MODEL: m})), float(se.sel({MODEL: m})))}"
            for m in cmp[MODEL].values)
        parts.append(f"{d} / {p}: closest output to the oracle: {best} "
                     f"(TVD {float(tv.sel({MODEL: best})):.3f}); updating slopes {slopes}")
    return "\n".join(parts)


# ----------------------------------------------------------------------------- plots


def _colors(n: int) -> list[Any]:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def depth_plot(cmp: xr.Dataset, out: Path) -> Path:
    """TVD to the oracle against relative depth (mean over turns ± mean SEM), one colour per
    model: logit lens solid, probe dashed, the output as a dotted level; one panel per
    (delivery, probe)."""
    plt = _pyplot()
    cells = _cells(cmp)
    cols = min(2, len(cells)) or 1
    rows = (len(cells) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.0 * rows), squeeze=False)
    models = [str(m) for m in cmp[MODEL].values]
    colors = _colors(len(models))
    for ax, (d, p) in zip(axes.flat, cells, strict=False):
        for m, c in zip(models, colors, strict=True):
            sub = cmp.sel({MODEL: m, "delivery": d, "probe": p})
            # each of the model's own layers once, at its own depth (the grid repeats layers)
            own, first = np.unique(sub[LAYER].values, return_index=True)
            x = own / int(sub["n_layers"])
            for s, ls in (("logit-lens", "-"), ("probe", "--")):
                tv = sub.sel({SOURCE: s}).isel({DEPTH: first})
                mean = tv["tvd_mean"].mean(TURN, skipna=True).values
                if not np.isfinite(mean).any():
                    continue
                err = np.nan_to_num(tv["tvd_sem"].mean(TURN, skipna=True).values)
                ax.plot(x, mean, ls=ls, color=c, label=f"{m} {s}")
                ax.fill_between(x, mean - err, mean + err, color=c, alpha=0.12)
            level = float(sub["output_tvd_mean"].mean(skipna=True))
            if np.isfinite(level):
                ax.axhline(level, color=c, ls=":", lw=1.2, label=f"{m} output")
        ax.set_title(f"{p} ({d})")
        ax.set_xlabel("relative depth (layer / blocks; 0 = embeddings)")
        ax.set_ylabel("TVD to oracle (mean over turns)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(cells):]:
        ax.axis("off")
    fig.suptitle("Where each model's belief forms: lens (solid) and probe (dashed) against "
                 "depth; output (dotted)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def turns_plot(cmp: xr.Dataset, out: Path) -> Path:
    """Output TVD to the oracle per turn (mean ± SEM over episodes), one line per model;
    one panel per (delivery, probe)."""
    plt = _pyplot()
    cells = _cells(cmp)
    fig, axes = plt.subplots(1, max(1, len(cells)), figsize=(5.2 * max(1, len(cells)), 3.8),
                             squeeze=False)
    models = [str(m) for m in cmp[MODEL].values]
    for ax, (d, p) in zip(axes[0], cells, strict=False):
        for m, c in zip(models, _colors(len(models)), strict=True):
            sub = cmp.sel({MODEL: m, "delivery": d, "probe": p})
            t = sub[TURN].values
            mean = sub["output_tvd_mean"].values
            err = np.nan_to_num(sub["output_tvd_sem"].values)
            ax.plot(t, mean, marker="o", ms=3, color=c, label=m)
            ax.fill_between(t, mean - err, mean + err, color=c, alpha=0.15)
        ax.set_title(f"{p} ({d})")
        ax.set_xlabel("turn (evidence so far)")
        ax.set_ylabel("output TVD to oracle")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    fig.suptitle("Output belief vs the Bayesian oracle, per turn (mean ± 1 SEM over episodes)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def updating_plot(cmp: xr.Dataset, out: Path) -> Path:
    """Left: updating slope ± 1 clustered SE per model and (delivery, probe) (1 = Bayesian);
    right: position bias, the mean TVD of a rotation's belief from the debiased one."""
    plt = _pyplot()
    cells = _cells(cmp)
    models = [str(m) for m in cmp[MODEL].values]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.8))
    width = 0.8 / max(1, len(models))
    xs = np.arange(len(cells))
    for i, (m, c) in enumerate(zip(models, _colors(len(models)), strict=True)):
        slope = [float(cmp["slope"].sel({MODEL: m, "delivery": d, "probe": p})) for d, p in cells]
        se = [float(cmp["slope_se"].sel({MODEL: m, "delivery": d, "probe": p}))
              for d, p in cells]
        rot = [float(cmp["rotation_tvd_mean"].sel({MODEL: m, "delivery": d, "probe": p})
                     .mean(skipna=True)) for d, p in cells]
        a1.bar(xs + i * width, slope, width, yerr=np.nan_to_num(se), color=c, label=m)
        a2.bar(xs + i * width, rot, width, color=c, label=m)
    labels = [f"{p}\n({d})" for d, p in cells]
    for ax in (a1, a2):
        ax.set_xticks(xs + 0.4 - width / 2, labels, fontsize=8)
        ax.legend(fontsize=7)
    a1.axhline(1.0, color="k", ls="--", lw=0.8)
    a1.axhline(0.0, color="k", lw=0.8)
    a1.set_ylabel("Δ model estimate / Δ oracle estimate")
    a1.set_title("Updating slope (1 = Bayesian, 0 = ignores evidence)")
    a2.set_ylabel("mean TVD(rotation's belief, debiased)")
    a2.set_title("Position bias")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _markdown(cmp: xr.Dataset, table: str, turns: str, head: str) -> str:
    rows = "\n".join(
        f"| `{m}` | `{cmp['model_id'].sel({MODEL: m}).item()}` | "
        f"{int(cmp['n_layers'].sel({MODEL: m}))} | "
        f"`{str(cmp['weights_hash'].sel({MODEL: m}).item())[:12]}…` | "
        f"`{cmp['source_file'].sel({MODEL: m}).item()}` |"
        for m in cmp[MODEL].values)
    return f"""# belieflens model comparison

**Environment** `{cmp.attrs['env_name']}` `{cmp.attrs['env_params']}` · **episodes**
{cmp.attrs['episodes']} · **seed** {cmp.attrs['seed']} · **debias** {cmp.attrs['debias']}

| model | id | blocks | weights sha256 | file |
|---|---|---|---|---|
{rows}

**Headline**

```
{head}
```

## Output belief per turn

TVD of each model's debiased output belief to the exact Bayesian oracle (0 = the oracle),
per turn, mean ± 1 SEM over episodes.

![output TVD per turn](compare_turns.png)

```
{turns}
```

## Where the belief forms, by relative depth

Layers are aligned by relative depth (layer / number of blocks): 0 is the embedding of the
last prompt token, 1 the last block's output. Solid: logit lens (each layer read through the
model's own final norm and unembedding); dashed: linear probe (held-out, folds grouped by
episode); dotted: the model's output. *Closest depth* is the model's own layer with the
lowest TVD averaged over turns.

![TVD against relative depth](compare_depth.png)

## Updating and position bias

The **updating slope** is the least-squares slope (through the origin) of the change of the
model's point estimate from one turn to the next against the oracle's change over the same
turn: 1 updates as much as a Bayesian, 0 ignores the evidence, above 1 over-reacts. Its
standard error is clustered by episode. **Position bias** is the mean TVD between the belief
of one Latin-square rotation and the debiased belief (0: the model ignores answer positions).

![updating slope and position bias](compare_updating.png)

```
{table}
```
"""


def compare_report(
    files: Sequence[CacheLike],
    out_dir: str | Path | None = None,
    *,
    method: DebiasMethod = "geometric",
    probes: bool = True,
    seed: int = 0,
) -> Analysis:
    """``belieflens compare``: :func:`compare` as text tables; with ``out_dir``, also
    ``compare_depth.png``, ``compare_turns.png``, ``compare_updating.png``, ``compare.md``
    and the Dataset as ``compare.nc``. With ``out_dir``, every file's chunks are checked
    against their checksums before anything is written."""
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        from belieflens.store.integrity import verify_file
        from belieflens.store.study import cache_files

        for f in files:
            for one in cache_files(f) if Path(f).is_dir() else [Path(f)]:
                verify_file(one)
    cmp = compare(files, method=method, probes=probes, seed=seed)
    table = format_compare(cmp)
    turns = format_turns(cmp)
    head = headline(cmp)
    text = (f"env {cmp.attrs['env_name']} {cmp.attrs['env_params']} | episodes "
            f"{cmp.attrs['episodes']} | seed {cmp.attrs['seed']} | models "
            f"{', '.join(map(str, cmp[MODEL].values))}\n\n{turns}\n{table}\n{head}\n")
    written: list[Path] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        written = [
            depth_plot(cmp, out / "compare_depth.png"),
            turns_plot(cmp, out / "compare_turns.png"),
            updating_plot(cmp, out / "compare_updating.png"),
        ]
        nc = out / "compare.nc"
        cmp.to_netcdf(nc, engine="h5netcdf")
        md = out / "compare.md"
        md.write_text(_markdown(cmp, table, turns, head))
        written += [nc, md]
    return Analysis(text=text, headline=head, files=tuple(written))
