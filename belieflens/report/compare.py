"""``belieflens compare``: several models on one study as text tables, figures and
``compare.md`` (the Dataset is :func:`belieflens.analysis.compare.compare`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.compare import (
    DEPTH,
    LAYER_SOURCES,
    MODEL,
    SOURCE,
    CacheLike,
    ControlLookup,
    compare,
    no_controls,
)
from belieflens.dims import LAYER, TURN
from belieflens.report.analysis import Analysis
from belieflens.report.atomic import final, staged
from belieflens.report.compare_floor import FIGURE, floor_plot, format_floors, has_floors
from belieflens.report.figures import pyplot, save
from belieflens.report.tables import cells, has_values, pm
from belieflens.report.viewer import compare_payload, render_html
from belieflens.store import space
from belieflens.types import DebiasMethod


def _cells(cmp: xr.Dataset) -> list[tuple[str, str]]:
    """The (delivery, probe) pairs that have an output value for some model."""
    return [(d, p) for d, p, _ in cells(cmp["output_tvd_mean"], has_values)]


def _width(cmp: xr.Dataset) -> int:
    """The model column's width: 22, or wider for a long name (a positive control's)."""
    return max(22, *(len(str(m)) + 2 for m in cmp[MODEL].values))


def _shown(cmp: xr.Dataset, d: str, p: str) -> list[str]:
    """The models with an output value in cell (delivery ``d``, probe ``p``): a positive
    control has none in a probe its environment lacks."""
    tv = cmp["output_tvd_mean"].sel(delivery=d, probe=p)
    return [str(m) for m in cmp[MODEL].values if not bool(tv.sel({MODEL: m}).isnull().all())]


def control_note(cmp: xr.Dataset) -> str:
    """What the positive controls among the models are ('' without one)."""
    text = str(cmp.attrs.get("positive_controls", ""))
    if not text:
        return ""
    return ("positive control: a toy transformer trained here on the token form of this "
            "environment, known to update like the Bayesian posterior, read out by the same "
            f"pipeline ({text}); its read-out after k flips stands at turn k / per_turn, "
            "the same values in each delivery\n")


def format_compare(cmp: xr.Dataset) -> str:
    """Plain-text tables of :func:`compare`: one block per (delivery, probe), a row per model."""
    lines: list[str] = []
    w = _width(cmp)
    head = (f"  {'model':<{w}}{'blocks':>7}  {'output TVD':>12}  {'lens: depth (layer) TVD':>26}"
            f"  {'decoder: depth (layer) TVD':>26}  {'updating slope':>15}  {'rot. TVD':>8}")
    for d, p in _cells(cmp):
        lines.append(f"{d} / {p}: mean over turns; slope ± clustered SE; rotation TVD = "
                     "position bias")
        lines.append(head)
        for m in _shown(cmp, d, p):
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
            slope = pm(float(sub["slope"]), float(sub["slope_se"]))
            rot = float(sub["rotation_tvd_mean"].mean(skipna=True))
            lines.append(
                f"  {m!s:<{w}}{int(cmp['n_layers'].sel({MODEL: m})):>7}  "
                f"{pm(out_m, out_s):>12}  {best[0]:>26}  {best[1]:>26}  {slope:>15}  "
                f"{'-' if not np.isfinite(rot) else f'{rot:.3f}':>8}"
            )
        lines.append("")
    return "\n".join(lines)


def format_turns(cmp: xr.Dataset) -> str:
    """Output TVD to the oracle per model and turn, one block per (delivery, probe)."""
    lines: list[str] = []
    turns = [int(t) for t in cmp[TURN].values]
    w = _width(cmp)
    for d, p in _cells(cmp):
        lines.append(f"{d} / {p}: output TVD to oracle per turn (mean over episodes)")
        lines.append(f"  {'model':<{w}}" + "".join(f"{t:>7}" for t in turns))
        for m in _shown(cmp, d, p):
            v = cmp["output_tvd_mean"].sel({MODEL: m, "delivery": d, "probe": p}).values
            lines.append(f"  {m!s:<{w}}" + "".join(
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
            f"{m} {pm(float(slope.sel({MODEL: m})), float(se.sel({MODEL: m})))}"
            for m in _shown(cmp, d, p))
        parts.append(f"{d} / {p}: closest output to the oracle: {best} "
                     f"(TVD {float(tv.sel({MODEL: best})):.3f}); updating slopes {slopes}")
    return "\n".join(parts)


# ----------------------------------------------------------------------------- plots


def _colors(n: int) -> list[Any]:
    plt = pyplot()
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def depth_plot(cmp: xr.Dataset, out: Path) -> Path:
    """TVD to the oracle against relative depth (mean over turns ± mean SEM), one colour per
    model: logit lens solid, decoder dashed, the output as a dotted level; one panel per
    (delivery, probe)."""
    plt = pyplot()
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
            for s, ls in (("logit-lens", "-"), ("decoder", "--")):
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
    fig.suptitle("Where each model's belief forms: lens (solid) and decoder (dashed) against "
                 "depth; output (dotted)")
    return save(fig, out, tight=True)


def turns_plot(cmp: xr.Dataset, out: Path) -> Path:
    """Output TVD to the oracle per turn (mean ± SEM over episodes), one line per model;
    one panel per (delivery, probe)."""
    plt = pyplot()
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
    return save(fig, out, tight=True)


def updating_plot(cmp: xr.Dataset, out: Path) -> Path:
    """Left: updating slope ± 1 clustered SE per model and (delivery, probe) (1 = Bayesian);
    right: position bias, the mean TVD of a rotation's belief from the debiased one."""
    plt = pyplot()
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
    return save(fig, out, tight=True)


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

{control_note(cmp)}
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
model's own final norm and unembedding); dashed: linear decoder (held-out, folds grouped by
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
{_floor_markdown(cmp)}"""


def _floor_markdown(cmp: xr.Dataset) -> str:
    """The floors' section of ``compare.md`` ('' without controls among the files)."""
    if not has_floors(cmp):
        return ""
    return f"""
## Beside untrained networks: the floors

Each model's logit-lens and decoder TVD to the oracle per layer beside the same read-out of
untrained networks of its shape (`extract --init random:SEED`, the files labelled
*untrained*): the band is the controls' range, the selectivity is floor − trained (positive:
closer to the oracle than any network of that shape gives untrained), its interval over the
episodes (paired) and the controls' seeds, corrected across layers (max-T); a model needs two
controls. Dots mark layers whose interval excludes 0.

![each model beside its untrained band](compare_floor.png)

```
{format_floors(cmp)}
```
"""


FIGURE_BYTES = 1_000_000
"""What ``compare --out``'s space check allows for each figure (its PNGs measure under
0.2 MB)."""

NETCDF_BYTES = 1 << 20
"""What it allows for ``compare.nc``'s metadata beside the Dataset's own bytes."""


def compare_report(
    files: Sequence[CacheLike],
    out_dir: str | Path | None = None,
    *,
    method: DebiasMethod = "geometric",
    decoders: bool = True,
    seed: int = 0,
    html: bool = True,
    control_of: ControlLookup = no_controls,
) -> Analysis:
    """``belieflens compare``: :func:`compare` as text tables (``control_of``: which
    environments' studies join as positive controls); with ``out_dir``, also
    ``compare_depth.png``, ``compare_turns.png``, ``compare_updating.png``, ``compare.md``,
    the Dataset as ``compare.nc`` and, with ``html``, the interactive page ``compare.html``
    (:func:`belieflens.report.viewer.compare_page`). With ``out_dir``, every file's chunks
    are checked against their checksums before anything is written, and so is the free
    space on its filesystem (the pages and the Dataset's bytes, :data:`FIGURE_BYTES` per
    figure: one line if short); the report is written beside ``out_dir`` and moved into
    place once whole (:func:`belieflens.report.atomic.staged`)."""
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        from belieflens.store.cache import cache_files
        from belieflens.store.integrity import verify_file

        for f in files:
            for one in cache_files(f) if Path(f).is_dir() else [Path(f)]:
                verify_file(one)
    cmp = compare(files, method=method, decoders=decoders, seed=seed, control_of=control_of)
    table = format_compare(cmp)
    turns = format_turns(cmp)
    head = headline(cmp)
    text = (f"env {cmp.attrs['env_name']} {cmp.attrs['env_params']} | episodes "
            f"{cmp.attrs['episodes']} | seed {cmp.attrs['seed']} | models "
            f"{', '.join(map(str, cmp[MODEL].values))}\n{control_note(cmp)}\n{turns}\n"
            f"{table}\n{head}\n")
    if has_floors(cmp):
        text += f"\n{format_floors(cmp)}\n"
    written: tuple[Path, ...] = ()
    if out is not None:
        written = _write(cmp, out, _markdown(cmp, table, turns, head),
                         _page(cmp, table, head) if html else None)
    return Analysis(text=text, headline=head, files=written)


def _page(cmp: xr.Dataset, table: str, head: str) -> str:
    """The text of ``compare.html``."""
    payload = compare_payload(cmp, table, head)
    return render_html(payload, str(payload["title"]))


def _write(cmp: xr.Dataset, out: Path, md: str, page: str | None) -> tuple[Path, ...]:
    """Write the report into ``out`` whole or not at all, once its size is checked."""
    figures: tuple[tuple[Callable[[xr.Dataset, Path], Path], str], ...] = (
        (depth_plot, "compare_depth.png"), (turns_plot, "compare_turns.png"),
        (updating_plot, "compare_updating.png"))
    if has_floors(cmp):
        figures = (*figures, (floor_plot, FIGURE))
    pages = len(md.encode()) + (len((page or "").encode()))
    space.require(out, cmp.nbytes + NETCDF_BYTES + pages + FIGURE_BYTES * len(figures))
    with staged(out) as stage:
        assert stage is not None
        folder = stage.folder
        written = [plot(cmp, folder / name) for plot, name in figures]
        cmp.to_netcdf(folder / "compare.nc", engine="h5netcdf")
        (folder / "compare.md").write_text(md)
        written += [folder / "compare.nc", folder / "compare.md"]
        if page is not None:
            (folder / "compare.html").write_text(page, encoding="utf-8")
            written.append(folder / "compare.html")
    return final(stage, written)
