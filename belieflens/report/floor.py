"""The floor section of ``belieflens analyze --floor``: every internal read-out beside the
same read-out of untrained controls and beside the statistic baselines
(:func:`belieflens.analysis.floor.floor`), as text, a figure and Markdown."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.floor import CONTROL, SOURCE
from belieflens.analysis.power_record import Marks
from belieflens.dims import BASELINE, LAYER
from belieflens.report.figures import floor_panel, pyplot, save
from belieflens.report.section import Section

FIGURE = "floor.png"
"""The figure's file name in the output folder."""

TITLE = "Floors: each read-out beside untrained controls and statistic baselines"


def layer_span(layers: NDArray[np.int64]) -> str:
    """``3-7, 9``: a sorted set of layers as runs."""
    runs: list[str] = []
    start = prev = -2
    for la in [int(x) for x in layers]:
        if la != prev + 1:
            if start >= 0:
                runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = la
        prev = la
    if start >= 0:
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(runs)


def _best(s: xr.Dataset) -> str:
    """The best statistic baseline of one source, named, with its value ('' without)."""
    name = str(s["baseline_best"].values)
    if not name:
        return ""
    return f"{name} {float(s['baseline_value'].sel({BASELINE: name})):.4f}"


def _against(s: xr.Dataset) -> str:
    """What a source's selectivity is against: the floor, or the larger of it and the best
    statistic baseline."""
    best = _best(s)
    return f"the larger of its floor and its best statistic baseline ({best})" if best \
        else "its floor (no statistic baseline)"


def verdicts(f: xr.Dataset, marks: Marks | None = None) -> list[str]:
    """One line per source: at how many layers it is beyond the larger of its floor and its
    best statistic baseline (intervals corrected across the layers), and its best layer;
    with ``marks``, then whether its test has shown power on a known pair of the study's
    kind (:mod:`belieflens.analysis.power_record`)."""
    lines = []
    for src in f[SOURCE].values:
        s = f.sel({SOURCE: src})
        what = "TVD to the oracle" if str(s["metric"].values) == "tvd" else "held-out R2"
        sel = np.asarray(s["selectivity"].values)
        best = int(np.nanargmax(sel)) if np.isfinite(sel).any() else 0
        at = s.isel({LAYER: best})
        best_text = (f"best layer {best}: {float(at.trained):.4f} vs floor "
                     f"{float(at.floor_mean):.4f}, selectivity {float(at.selectivity):+.4f} "
                     f"[{float(at.selectivity_low):+.4f}, {float(at.selectivity_high):+.4f}]")
        above = np.flatnonzero(np.asarray(s["exceeds"].values))
        floor_only = int(np.asarray(s["exceeds_floor"].values).sum())
        head = f"{src} ({what}) against {_against(s)}: "
        head += (f"beyond it at {above.size} of {sel.size} layers ({layer_span(above)})"
                 if above.size else "no layer beyond it")
        head += f" (beyond the floor alone: {floor_only}); {best_text}"
        if np.isfinite(float(s["trained_all"])):
            head += (f"; all layers {float(s.trained_all):.4f} vs floor "
                     f"{float(s.floor_mean_all):.4f}, selectivity "
                     f"{float(s.selectivity_all):+.4f} [{float(s.selectivity_low_all):+.4f}, "
                     f"{float(s.selectivity_high_all):+.4f}]")
        if marks is not None:
            head += f"; {marks.note(str(src))}"
        lines.append(head)
    return lines


KEYS = ("trained", "floor_mean", "floor_min", "floor_max", "selectivity_floor",
        "selectivity_floor_low", "selectivity_floor_high", "selectivity_baseline",
        "selectivity_baseline_low", "selectivity_baseline_high", "selectivity", "exceeds")
"""The columns of a source's table, in order."""


def _rows(s: xr.Dataset) -> list[str]:
    """One source's table: per layer (and all layers) the trained value, the floor, the
    selectivity against the floor and against the best baseline, each with its interval."""
    has_base = bool(str(s["baseline_best"].values))
    best = str(s["baseline_best"].values)
    head = "layer   trained     floor [min, max]            vs floor [interval]"
    if has_base:
        head += f"          {best:>10}  vs {best} [interval]"
    lines = [head]
    rows = [(str(int(la)), [float(s[k].sel({LAYER: la})) for k in KEYS]) for la in s[LAYER].values]
    if np.isfinite(float(s["trained_all"])):
        rows.append(("all", [float(s[f"{k}_all"]) for k in KEYS]))
    base = float(s["baseline_value"].sel({BASELINE: best})) if has_base else np.nan
    for name, (t, fm, fmin, fmax, sf, lf, hf, sb, lb, hb, _, beyond) in rows:
        line = (f"{name:>5} {t:9.4f} {fm:9.4f} [{fmin:.4f}, {fmax:.4f}] "
                f"{sf:+9.4f} [{lf:+.4f}, {hf:+.4f}]")
        if has_base:
            line += f" {base:10.4f} {sb:+9.4f} [{lb:+.4f}, {hb:+.4f}]"
        lines.append(line + (" *" if beyond else ""))
    return lines


def format_floor(f: xr.Dataset, marks: Marks | None = None) -> str:
    """The floor as text: the verdict per source, then per source the statistic baselines
    and per layer the trained value, the floor's mean [min, max], the selectivity against the
    floor and against the best baseline, each [interval]."""
    labels = ", ".join(str(c) for c in f[CONTROL].values)
    lines = [f"floors: {f.sizes[CONTROL]} controls ({labels}); selectivity = beyond the "
             f"reference, positive = better; {int(f.attrs['level'] * 100)}% intervals over "
             f"{f.attrs['episodes']} episodes and the controls' seeds, corrected across "
             f"layers (max-T)", *verdicts(f, marks), ""]
    for src in f[SOURCE].values:
        s = f.sel({SOURCE: src})
        lines.append(f"{src}  ({'TVD' if str(s.metric.values) == 'tvd' else 'R2'})")
        if f.sizes[BASELINE]:
            base = ", ".join(f"{b!s} {float(s.baseline_value.sel({BASELINE: b})):.4f}"
                             for b in f[BASELINE].values)
            lines.append(f"statistic baselines (same folds and estimator): {base}; "
                         f"best: {s.baseline_best.values}")
        lines += [*_rows(s), ""]
    lines.append("* beyond the larger of the floor and the best statistic baseline: both "
                 "intervals above 0")
    return "\n".join(lines)


def floor_figure(f: xr.Dataset, out: Path, marks: Marks | None = None) -> Path:
    """One panel per source (:func:`~belieflens.report.figures.floor_panel`): the value per
    layer, each control's (thin), the floor's range over controls (band), the best statistic
    baseline (dashed) and the layers beyond both (dots); a source whose test has not shown
    power on a known pair of the study's kind is marked so in its title."""
    plt = pyplot()
    sources = [str(s) for s in f[SOURCE].values]
    cols = min(2, len(sources)) or 1
    rows = (len(sources) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.3 * rows), squeeze=False)
    for ax, src in zip(axes.flat, sources, strict=False):
        floor_panel(ax, f.sel({SOURCE: src}), f.sizes[CONTROL],
                    src + (marks.beside(src) if marks is not None else ""))
    for ax in list(axes.flat)[len(sources):]:
        ax.axis("off")
    fig.suptitle("Each read-out per layer beside its untrained floor and statistic baselines",
                 fontsize=11)
    return save(fig, out, dpi=100, tight=True)


RESULT_COLUMNS: tuple[str, ...] = (
    "read-out", "metric", "layers beyond the floor and the best baseline",
    "first layer beyond both", "beyond the floor alone",
    "best layer: trained vs floor [min, max], best baseline",
    "selectivity at the best layer [corrected interval]")
"""The columns of the results table of ``analyze --results``: one row per source of each
comparison beside untrained controls (:func:`result_rows`)."""


def result_rows(f: xr.Dataset, what: str = "") -> tuple[tuple[str, ...], ...]:
    """One row per source of a floor Dataset (:data:`RESULT_COLUMNS`), each read-out named
    ``WHAT: SOURCE`` (the source alone without ``what``)."""
    rows = []
    for src in f[SOURCE].values:
        s = f.sel({SOURCE: src})
        sel = np.asarray(s["selectivity"].values)
        best = int(np.nanargmax(sel)) if np.isfinite(sel).any() else 0
        at = s.isel({LAYER: best})
        above = np.flatnonzero(np.asarray(s["exceeds"].values))
        base = _best(s)
        rows.append((
            f"{what}: {src}" if what else str(src),
            "TVD to the oracle" if str(s["metric"].values) == "tvd" else "held-out R2",
            f"{above.size} of {sel.size}" + (f" ({layer_span(above)})" if above.size else ""),
            str(int(above[0])) if above.size else "none",
            str(int(np.asarray(s["exceeds_floor"].values).sum())),
            f"{best}: {float(at.trained):.4f} vs {float(at.floor_mean):.4f} "
            f"[{float(at.floor_min):.4f}, {float(at.floor_max):.4f}]"
            + (f", {base}" if base else ""),
            f"{float(at.selectivity):+.4f} [{float(at.selectivity_low):+.4f}, "
            f"{float(at.selectivity_high):+.4f}]"))
    return tuple(rows)


def floor_section(f: xr.Dataset, out_dir: Path | None, *, title: str = TITLE,
                  figure: str = FIGURE, what: str = "floor", marks: Marks | None = None
                  ) -> Section:
    """The floor as a report section (with ``out_dir``, its figure ``figure`` too), its rows
    of the results table named ``WHAT: SOURCE``. Any comparison laid out as a floor (sources
    over layers beside untrained controls) is shown this way under its ``title``; each
    source's verdict says whether its test has shown power on a known pair of the study's
    kind (``marks``)."""
    text = format_floor(f, marks)
    md = "\n".join(f"- {line}" for line in verdicts(f, marks)) + f"\n\n```\n{text}\n```\n"
    md += (f"\nIntervals: {f.attrs['interval']}. Correction across layers: "
           f"{f.attrs['correction']}.\n")
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = (floor_figure(f, out_dir / figure, marks),)
        md += f"\n![each read-out beside its untrained floor]({figure})\n"
    return Section(title=title, text=text, markdown=md, files=files,
                   results=result_rows(f, what))
