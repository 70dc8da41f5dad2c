"""The floor section of ``belieflens analyze --floor``: every internal read-out beside the
same read-out of untrained controls (:func:`belieflens.analysis.floor.floor`), as text, a
figure and Markdown."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.floor import CONTROL, SOURCE, format_floor, verdicts
from belieflens.dims import LAYER
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section

FIGURE = "floor.png"
"""The figure's file name in the output folder."""

TITLE = "Floors: each read-out beside untrained controls"


def floor_figure(f: xr.Dataset, out: Path) -> Path:
    """One panel per source: the trained value per layer, each control's (thin), the floor's
    range over controls (band) and the selectivity interval's layers beyond the floor
    (dots)."""
    plt = pyplot()
    sources = [str(s) for s in f[SOURCE].values]
    cols = min(2, len(sources)) or 1
    rows = (len(sources) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.3 * rows), squeeze=False)
    x = f[LAYER].values
    for ax, src in zip(axes.flat, sources, strict=False):
        s = f.sel({SOURCE: src})
        ax.fill_between(x, s.floor_min.values, s.floor_max.values, color="0.6", alpha=0.35,
                        label=f"untrained band ({f.sizes[CONTROL]} seeds)")
        for c in f[CONTROL].values:
            ax.plot(x, s.control_value.sel({CONTROL: c}).values, color="0.5", lw=0.6)
        ax.plot(x, s.trained.values, color="C0", lw=1.8, label="trained")
        beyond = np.asarray(s.exceeds.values, dtype=bool)
        ax.plot(x[beyond], s.trained.values[beyond], "o", color="C3", ms=3.5,
                label="beyond the floor (interval > 0)")
        metric = str(s.metric.values)
        ax.set_ylabel("TVD to oracle (lower is better)" if metric == "tvd" else "held-out R²")
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_title(src, fontsize=10)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(sources):]:
        ax.axis("off")
    fig.suptitle("Each read-out per layer beside its untrained floor", fontsize=11)
    return save(fig, out, dpi=100, tight=True)


def floor_section(f: xr.Dataset, out_dir: Path | None) -> Section:
    """The floor as a report section (with ``out_dir``, its figure too)."""
    text = format_floor(f)
    md = "\n".join(f"- {line}" for line in verdicts(f)) + f"\n\n```\n{text}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = (floor_figure(f, out_dir / FIGURE),)
        md += f"\n![each read-out beside its untrained floor]({FIGURE})\n"
    return Section(title=TITLE, text=text, markdown=md, files=files)
