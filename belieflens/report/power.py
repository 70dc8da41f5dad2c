"""``belieflens power`` as text and as a results table: per known pair and test, whether the
test separates the pair, at which layers, and its best layer's separation with the interval
(:mod:`belieflens.analysis.power`)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.power import PAIR, TEST
from belieflens.report.floor import layer_span

COLUMNS = ("pair", "kind", "test", "family", "separates at", "best layer: separation [95% "
           "interval]", "reference(s) there", "positive there")
"""The columns of :func:`power_rows`."""


def _cells(s: xr.Dataset) -> tuple[str, str, str, str]:
    """One (test, pair): the separating layers, the best layer's (the highest lower bound)
    separation [interval], and the two sides' values there."""
    if not bool(s["read"]):
        return "not read (these files lack what it reads)", "", "", ""
    layers = np.asarray(s["layer"].values)[np.asarray(s["separates"].values, dtype=bool)]
    n = int(np.isfinite(np.asarray(s["separation"].values)).sum())
    where = (f"{layers.size} of {n} layers ({layer_span(layers)})" if layers.size
             else f"no layer of {n}")
    if bool(s["reversed"]):
        where += "; reversed at some layer"
    at = s.sel(layer=int(s["best_layer"]))
    best = (f"{int(s['best_layer'])}: {float(at['separation']):+.4f} "
            f"[{float(at['separation_low']):+.4f}, {float(at['separation_high']):+.4f}]")
    ref = (f"{float(at['reference']):.4f} [{float(at['reference_min']):.4f}, "
           f"{float(at['reference_max']):.4f}]")
    return where, best, ref, f"{float(at['positive']):.4f}"


def power_rows(ds: xr.Dataset) -> list[list[str]]:
    """One row per (pair, test) of a power Dataset (:data:`COLUMNS`)."""
    rows = []
    for p in ds[PAIR].values:
        for t in ds[TEST].values:
            s = ds.sel({PAIR: p, TEST: t})
            rows.append([str(p), str(s["kind"].values), str(t), str(s["family"].values),
                         *_cells(s)])
    return rows


def format_power(ds: xr.Dataset) -> str:
    """The power Dataset as text: a line per pair, then per test whether it separates the
    pair (its layers), the best layer's separation with its interval and the two sides'
    values there."""
    lines = [f"power: each internal test on known pairs; separation = how far the network "
             f"known to hold the belief is beyond its reference(s), positive = better; "
             f"{int(float(ds.attrs['level']) * 100)}% intervals over episodes (and the "
             f"untrained seeds), corrected across layers (max-T)"]
    for p in ds[PAIR].values:
        one = ds.sel({PAIR: p})
        lines += ["", f"{p} ({one['kind'].values}; {one['env'].values}, "
                      f"{one['models'].values}; {int(one['episodes'])} episodes"
                      + (f", {int(one['left_out'])} read-outs left out as taught"
                         if int(one["left_out"]) else "") + ")"]
        for t in ds[TEST].values:
            s = one.sel({TEST: t})
            where, best, ref, pos = _cells(s)
            if not bool(s["read"]):
                lines.append(f"  {t:<30} not read (these files lack what it reads)")
                continue
            verdict = "POWER" if bool(s["power"]) else "no power"
            lines.append(f"  {t:<30} {verdict:<9} separates at {where}; best layer {best}; "
                         f"reference {ref}, positive {pos}")
    return "\n".join(lines)
