"""The floors of ``belieflens compare``: each model's logit-lens and decoder TVD per layer
beside its untrained controls (:mod:`belieflens.analysis.compare_floor`), as text and as the
figure ``compare_floor.png``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.compare_floor import READOUT
from belieflens.analysis.floor_test import TOLERANCE
from belieflens.analysis.power_record import Marks, Record, marks_for
from belieflens.report.figures import pyplot, save

FIGURE = "compare_floor.png"


def has_floors(cmp: xr.Dataset) -> bool:
    """Whether any compared model has untrained controls among the files."""
    return "floor_trained" in cmp.data_vars and bool(cmp["floor_trained"].notnull().any())


def _floored(cmp: xr.Dataset) -> list[str]:
    tr = cmp["floor_trained"]
    return [str(m) for m in cmp["model"].values
            if bool(tr.sel(model=m).notnull().any())]


def _rows(cmp: xr.Dataset, model: str, readout: str) -> list[tuple[int, float, list[float]]]:
    """(layer, depth, values) per distinct layer of ``model`` on the depth grid."""
    sub = cmp.sel(model=model, readout=readout)
    seen: set[int] = set()
    rows = []
    keys = ("floor_trained", "floor_mean", "floor_min", "floor_max", "floor_selectivity",
            "floor_selectivity_low", "floor_selectivity_high")
    own = cmp["layer"]
    own = own.sel(model=model) if "model" in own.dims else own  # equal for every model
    for i, dep in enumerate(cmp["depth"].values):
        layer = int(own.values[i])
        if layer in seen or not np.isfinite(float(sub["floor_trained"].values[i])):
            continue
        seen.add(layer)
        rows.append((layer, float(dep), [float(sub[k].values[i]) for k in keys]))
    return rows


def model_marks(cmp: xr.Dataset, model: str, record: Record | None = None) -> Marks:
    """The power marks (:mod:`belieflens.analysis.power_record`) of ``model``'s study kind."""
    attrs = {"env_name": str(cmp["env_name"].sel(model=model).values)
             if "env_name" in cmp else str(cmp.attrs.get("env_name", "")),
             "model_source": str(cmp["model_source"].sel(model=model).values)
             if "model_source" in cmp else ""}
    return marks_for(attrs, record)


def verdict(cmp: xr.Dataset, model: str, readout: str, record: Record | None = None) -> str:
    """Whether any layer of ``model``'s ``readout`` is beyond its floor beyond the
    interval, with the best layer, and whether its test has shown power on a known pair of
    the study's kind (``record``: default the shipped one)."""
    note = model_marks(cmp, model, record).note(readout)
    rows = _rows(cmp, model, readout)
    above = [la for la, _, v in rows if v[5] > TOLERANCE]
    la, _, v = max(rows, key=lambda r: r[2][4] if np.isfinite(r[2][4]) else -np.inf)
    best = (f"best layer {la}: TVD {v[0]:.4f} vs floor {v[1]:.4f}, selectivity {v[4]:+.4f} "
            f"[{v[5]:+.4f}, {v[6]:+.4f}]")
    if above:
        return (f"{model} {readout}: beyond its floor at {len(above)} of {len(rows)} layers; "
                f"{best}; {note}")
    return f"{model} {readout}: no layer beyond its floor; {best}; {note}"


def format_floors(cmp: xr.Dataset) -> str:
    """Per model with controls: a verdict per read-out and the per-layer table of TVD to the
    oracle: trained, the floor's mean [min, max] and the selectivity [95% interval]."""
    if not has_floors(cmp):
        return ""
    lines = ["floors: each model's TVD to the oracle per layer beside its untrained "
             "controls (mean over deliveries, probes and turns); selectivity = floor - "
             "trained, positive = closer to the oracle than the floor; "
             f"{cmp.attrs.get('floor_interval', '')}"]
    for m in _floored(cmp):
        lines += [verdict(cmp, m, str(r)) for r in cmp[READOUT].values]
    for m in _floored(cmp):
        for r in cmp[READOUT].values:
            lines += ["", f"{m}: {r} TVD per layer",
                      "layer  depth   trained     floor [min, max]            selectivity "
                      "[interval]"]
            for la, dep, v in _rows(cmp, m, str(r)):
                mark = " *" if v[5] > TOLERANCE else ""
                lines.append(f"{la:>5}  {dep:5.2f} {v[0]:9.4f} {v[1]:9.4f} [{v[2]:.4f}, "
                             f"{v[3]:.4f}] {v[4]:+9.4f} [{v[5]:+.4f}, {v[6]:+.4f}]{mark}")
    lines.append("* the interval excludes 0: beyond the floor")
    return "\n".join(lines)


def floor_plot(cmp: xr.Dataset, out: Path) -> Path:
    """One panel per read-out: each model's TVD per relative depth (line) with its untrained
    band (the controls' range), layers beyond the floor marked."""
    plt = pyplot()
    readouts = [str(r) for r in cmp[READOUT].values]
    fig, axes = plt.subplots(1, len(readouts), figsize=(5.6 * len(readouts), 3.8),
                             squeeze=False)
    x = cmp["depth"].values
    for ax, r in zip(axes.flat, readouts, strict=False):
        for i, m in enumerate(_floored(cmp)):
            sub = cmp.sel(model=m, readout=r)
            c = f"C{i}"
            ax.fill_between(x, sub.floor_min.values, sub.floor_max.values, color=c, alpha=0.18)
            ax.plot(x, sub.floor_mean.values, color=c, lw=0.8, ls=":")
            ax.plot(x, sub.floor_trained.values, color=c, lw=1.8, label=m)
            beyond = np.asarray(sub.floor_exceeds.values, dtype=bool)
            ax.plot(x[beyond], sub.floor_trained.values[beyond], "o", color=c, ms=3)
        mark = " (no shown power)" if any(not model_marks(cmp, m).has_power(r)
                                          for m in _floored(cmp)) else ""
        ax.set_title(f"{r}{mark}: TVD to the oracle (band: untrained seeds)", fontsize=10)
        ax.set_xlabel("relative depth (0 = embeddings, 1 = last block)")
        ax.set_ylabel("TVD to oracle")
        ax.legend(fontsize=7)
    fig.suptitle("Each model beside untrained networks of its shape (dots: beyond the floor)",
                 fontsize=10)
    return save(fig, out, dpi=110, tight=True)
