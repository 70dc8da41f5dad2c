"""Figures: the one matplotlib entry point (:func:`pyplot`, :func:`save`) and the study report's
plots (belief trajectories against the oracle, layer x turn heatmaps, position bias,
calibration). Every plot takes computed xarray results and a path, and returns the path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.power_record import Marks
from belieflens.report.tables import cells, has_values


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported on first use: it is
    slow to import, and analysis without figures never needs it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, out: Path, *, dpi: int = 110, tight: bool = False) -> Path:
    """Write ``fig`` to ``out`` as a PNG at ``dpi`` and close it; returns ``out``.

    ``tight``: first fit the subplots to the figure (``fig.tight_layout()``).
    """
    if tight:
        fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    return out


def trajectory_plot(table: xr.Dataset, out: Path) -> Path:
    """Model point estimate (mean ± 1 SEM over episodes) vs the oracle's, per turn.

    One panel per probe; one line per delivery.
    """
    plt = pyplot()
    probes = [str(p) for p in table["probe"].values]
    fig, axes = plt.subplots(1, len(probes), figsize=(5 * len(probes), 3.8), squeeze=False)
    for ax, probe in zip(axes[0], probes, strict=True):
        kind = str(table["estimate_kind"].sel(probe=probe).values)
        for deliv in table["delivery"].values:
            sub = table.sel(probe=probe, delivery=deliv)
            if int(sub["n"].sum()) == 0:
                continue
            turns = sub["turn"].values
            m = sub["estimate_mean"].values
            s = np.nan_to_num(sub["estimate_sem"].values)
            ax.plot(turns, m, marker="o", label=f"model ({deliv})")
            ax.fill_between(turns, m - s, m + s, alpha=0.2)
            ax.plot(turns, sub["oracle_estimate_mean"].values, "k--", lw=1,
                    label=f"oracle ({deliv})" if len(table["delivery"]) > 1 else "oracle")
        ax.set_title(probe)
        ax.set_xlabel("turn (evidence so far)")
        ax.set_ylabel("E[value]" if kind == "mean" else "P(first outcome)")
        ax.set_ylim(-0.02, 1.02)
        if ax.get_legend_handles_labels()[0]:  # a probe with no finite values draws no line
            ax.legend(fontsize=7)
    fig.suptitle("Belief trajectory: model (mean ± 1 SEM over episodes) vs Bayesian oracle")
    return save(fig, out, tight=True)


def lens_heatmap(table: xr.Dataset, out: Path) -> Path:
    """Lens TVD to the oracle as a layer x turn heatmap, one panel per (delivery, probe)."""
    plt = pyplot()
    panels = [(d, p) for d, p, _ in cells(table["tvd_mean"], has_values)]
    cols = min(2, len(panels)) or 1
    rows = (len(panels) + cols - 1) // cols or 1
    # constrained layout keeps each row's titles clear of the row above's "turn" labels
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.6 * rows), squeeze=False,
                             layout="constrained")
    im = None
    for ax, (d, p) in zip(axes.flat, panels, strict=False):
        grid = table["tvd_mean"].sel(delivery=d, probe=p).transpose("layer", "turn")
        im = ax.imshow(grid.values, aspect="auto", origin="lower", vmin=0, vmax=1,
                       cmap="viridis",
                       extent=(float(grid["turn"].min()) - 0.5, float(grid["turn"].max()) + 0.5,
                               -0.5, grid.sizes["layer"] - 0.5))
        ax.set_title(f"{p} ({d})")
        ax.set_xlabel("turn")
        ax.set_ylabel("layer (0 = embeddings)")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), label="TVD to oracle")
    fig.suptitle("Logit lens: TVD of each layer's debiased belief to the oracle")
    return save(fig, out)


def source_heatmaps(summary: xr.Dataset, out: Path) -> Path:
    """Layer x turn heatmaps of TVD to the oracle: one row per (delivery, probe), one column
    per source of :func:`belieflens.analysis.summary` that has values."""
    plt = pyplot()
    tv = summary["tvd_mean"]
    sources = [str(s) for s in tv["source"].values if has_values(tv.sel(source=s))]
    panels = [(d, p) for d, p, _ in cells(tv, has_values)]
    rows, cols = max(1, len(panels)), max(1, len(sources))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 1, 2.8 * rows + 0.8),
                             squeeze=False)
    im = None
    for r, (d, p) in enumerate(panels):
        for c, s in enumerate(sources):
            ax = axes[r, c]
            grid = tv.sel(delivery=d, probe=p, source=s).transpose("layer", "turn")
            turns = grid["turn"].values
            im = ax.imshow(grid.values, aspect="auto", origin="lower", vmin=0, vmax=1,
                           cmap="viridis",
                           extent=(float(turns.min()) - 0.5, float(turns.max()) + 0.5,
                                   -0.5, grid.sizes["layer"] - 0.5))
            if r == 0:
                ax.set_title(s)
            if c == 0:
                ax.set_ylabel(f"{p}\n({d})\nlayer", fontsize=8)
            if r == rows - 1:
                ax.set_xlabel("turn")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), label="TVD to oracle (mean over episodes)")
    fig.suptitle("Distance from the Bayesian oracle by layer and turn, per read-out")
    return save(fig, out, dpi=100)


def layer_profile_plot(summary: xr.Dataset, out: Path, *, marks: Marks | None = None,
                       floors: xr.Dataset | None = None) -> Path:
    """TVD to the oracle per layer (mean over turns ± mean SEM), one line per source,
    one panel per (delivery, probe); a source whose test has not shown power on a known
    pair of the study's kind is marked so in the legend (``marks``). With ``floors``
    (:func:`belieflens.analysis.floor.floor`), one more panel per floored source: its value
    per layer over every question beside the untrained band, the best statistic baseline and
    the layers beyond both (:func:`floor_panel`)."""
    plt = pyplot()
    tv = summary["tvd_mean"]
    panels = [(d, p) for d, p, _ in cells(tv, has_values)]
    extra = [str(x) for x in floors["source"].values] if floors is not None else []
    n = len(panels) + len(extra)
    cols = min(2, n) or 1
    rows = (n + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.4 * rows), squeeze=False)
    for ax, (d, p) in zip(axes.flat, panels, strict=False):
        for s in tv["source"].values:
            m = tv.sel(delivery=d, probe=p, source=s).mean("turn", skipna=True)
            if bool(m.isnull().all()):
                continue
            e = summary["tvd_sem"].sel(delivery=d, probe=p, source=s).mean("turn", skipna=True)
            x = m["layer"].values
            mark = marks.beside(str(s)) if marks is not None and s != "output" else ""
            ax.plot(x, m.values, label=f"{s}{mark}", ls="--" if s == "output" else "-")
            ax.fill_between(x, m.values - np.nan_to_num(e.values),
                            m.values + np.nan_to_num(e.values), alpha=0.15)
        ax.set_title(f"{p} ({d})")
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_ylabel("TVD to oracle")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    for ax, src in zip(list(axes.flat)[len(panels):], extra, strict=False):
        assert floors is not None
        floor_panel(ax, floors.sel(source=src), floors.sizes["control"],
                    f"{src}, every question{marks.beside(src) if marks is not None else ''}")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle("Each read-out's TVD to the oracle per layer (mean over turns)"
                 + ("; beside untrained networks" if floors is not None else ""))
    return save(fig, out, dpi=100, tight=True)


def floor_panel(ax: Any, s: xr.Dataset, n_controls: int, title: str) -> None:
    """One source of a floor Dataset on ``ax``: the value per layer (line), each control's
    (thin), the untrained band (the controls' range), the best statistic baseline (dashed)
    and the layers beyond both (dots)."""
    x = s["layer"].values
    ax.fill_between(x, s.floor_min.values, s.floor_max.values, color="0.6", alpha=0.35,
                    label=f"untrained band ({n_controls} seeds)")
    for c in s["control"].values:
        ax.plot(x, s.control_value.sel(control=c).values, color="0.5", lw=0.6)
    best = str(s.baseline_best.values)
    if best:
        ax.axhline(float(s.baseline_value.sel(baseline=best)), color="C2", ls="--", lw=1.0,
                   label=f"best statistic baseline ({best})")
    ax.plot(x, s.trained.values, color="C0", lw=1.8, label="this network")
    beyond = np.asarray(s.exceeds.values, dtype=bool)
    ax.plot(x[beyond], s.trained.values[beyond], "o", color="C3", ms=3.5,
            label="beyond both (corrected interval > 0)")
    metric = str(s.metric.values)
    ax.set_ylabel("TVD to oracle (lower is better)" if metric == "tvd" else "held-out R²")
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)


def position_bias_plot(table: xr.Dataset, out: Path) -> Path:
    """Left: TVD of each rotation's belief from the debiased one; right: excess probability
    per answer position. One bar group per (delivery, probe)."""
    plt = pyplot()
    shown = list(cells(table, lambda s: int(s["rotation_n"].sum()) > 0))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.8))
    width = 0.8 / max(1, len(shown))
    for i, (d, p, sub) in enumerate(shown):
        rt = sub["rotation_tvd_mean"]
        ok = np.isfinite(rt.values)
        x = sub["rotation"].values[ok] + i * width
        a1.bar(x, rt.values[ok], width, yerr=np.nan_to_num(sub["rotation_tvd_sem"].values[ok]),
               label=f"{p} ({d})")
        pe = sub["position_excess_mean"]
        ok2 = np.isfinite(pe.values)
        a2.bar(sub["option"].values[ok2] + i * width, pe.values[ok2], width,
               yerr=np.nan_to_num(sub["position_excess_sem"].values[ok2]), label=f"{p} ({d})")
    centre = 0.4 - width / 2
    a1.set_xticks(table["rotation"].values + centre, [str(r) for r in table["rotation"].values])
    a2.set_xticks(table["option"].values + centre, [str(o) for o in table["option"].values])
    a1.set_xlabel("rotation")
    a1.set_ylabel("TVD(rotation's belief, debiased)")
    a1.set_title("How far each rotation is from the debiased belief")
    a2.axhline(0, color="k", lw=0.8)
    a2.set_xlabel("answer position (0 = first shown)")
    a2.set_ylabel("P(position) − P_debiased(outcome shown)")
    a2.set_title("Excess probability per position (> 0: favoured slot)")
    a1.legend(fontsize=7)
    return save(fig, out, dpi=100, tight=True)


def calibration_plot(rel: xr.Dataset, out: Path) -> Path:
    """Reliability diagram with the oracle as truth: mean oracle probability per bin of the
    model's probability, one line per probe (marker size ~ count)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="calibrated (= oracle)")
    for p in rel["probe"].values:
        sub = rel.sel(probe=p)
        ok = sub["count"].values > 0
        if not ok.any():
            continue
        lw = 2.5 if str(p) == "all" else 1.2
        ax.plot(sub["predicted"].values[ok], sub["oracle"].values[ok], marker="o", lw=lw,
                label=f"{p} (ECE {float(sub['ece']):.3f}, "
                      f"mean |Δ| {float(sub['mean_abs']):.3f})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("model probability (binned)")
    ax.set_ylabel("mean oracle probability in bin")
    ax.set_title("Calibration against the Bayesian oracle")
    ax.legend(fontsize=7)
    return save(fig, out, dpi=100, tight=True)
