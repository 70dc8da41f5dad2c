"""Plots: belief trajectories against the oracle, and layer x turn lens heatmaps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def trajectory_plot(table: xr.Dataset, out: Path) -> Path:
    """Model point estimate (mean ± 1 SEM over episodes) vs the oracle's, per turn.

    One panel per probe; one line per delivery.
    """
    plt = _pyplot()
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
        ax.legend(fontsize=7)
    fig.suptitle("Belief trajectory: model (mean ± 1 SEM over episodes) vs Bayesian oracle")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def lens_heatmap(table: xr.Dataset, out: Path) -> Path:
    """Lens TVD to the oracle as a layer x turn heatmap, one panel per (delivery, probe)."""
    plt = _pyplot()
    panels = [
        (str(d), str(p))
        for d in table["delivery"].values
        for p in table["probe"].values
        if not bool(table["tvd_mean"].sel(delivery=d, probe=p).isnull().all())
    ]
    cols = min(2, len(panels)) or 1
    rows = (len(panels) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.6 * rows), squeeze=False)
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
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
