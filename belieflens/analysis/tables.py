"""Per-turn and per-layer tables: divergence from the oracle, mean ± 1 SEM over episodes."""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import point_estimates
from belieflens.analysis.divergence import tvd
from belieflens.analysis.stats import mean_sem

__all__ = [
    "best_layers",
    "format_lens_table",
    "format_summary",
    "format_turn_table",
    "lens_table",
    "turn_table",
    "unpad",
]


def unpad(x: xr.DataArray, labels: xr.DataArray) -> xr.DataArray:
    """Set outcomes past each probe's K (label ``""``) to 0 so sums over ``outcome`` ignore them.

    Missing values at real outcomes (e.g. a probe without an oracle) stay NaN.
    """
    return x.where(labels != "", 0.0)


def turn_table(beliefs: xr.Dataset) -> xr.Dataset:
    """TVD to the oracle and point-estimate error per (delivery, probe, turn), mean ± SEM.

    Variables: ``tvd_mean``, ``tvd_sem``, ``abs_err_mean``, ``abs_err_sem`` (MAE of the
    point estimate), ``estimate_mean``, ``oracle_estimate_mean``, ``n``.
    """
    labels = beliefs["outcome_label"]
    d = tvd(unpad(beliefs["oracle"], labels), unpad(beliefs["belief"], labels), dim="outcome")
    pe = point_estimates(beliefs)
    err = abs(pe["estimate"] - pe["oracle_estimate"])
    t = mean_sem(d)
    e = mean_sem(err)
    return xr.Dataset(
        {
            "tvd_mean": t["mean"],
            "tvd_sem": t["sem"],
            "abs_err_mean": e["mean"],
            "abs_err_sem": e["sem"],
            "estimate_mean": pe["estimate"].mean("episode", skipna=True),
            "estimate_sem": mean_sem(pe["estimate"])["sem"],
            "oracle_estimate_mean": pe["oracle_estimate"].mean("episode", skipna=True),
            "n": t["n"],
            "estimate_kind": pe["estimate_kind"],
        }
    )


def lens_table(lens: xr.DataArray, oracle: xr.DataArray, labels: xr.DataArray) -> xr.Dataset:
    """TVD of lens beliefs to the oracle per (delivery, probe, turn, layer), mean ± SEM."""
    d = tvd(unpad(oracle, labels), unpad(lens, labels), dim="outcome")
    t = mean_sem(d)
    return xr.Dataset({"tvd_mean": t["mean"], "tvd_sem": t["sem"], "n": t["n"]})


def format_turn_table(table: xr.Dataset) -> str:
    """Plain-text rendering of :func:`turn_table`, one block per delivery and probe."""
    lines: list[str] = []
    for deliv in table["delivery"].values:
        for probe in table["probe"].values:
            sub = table.sel(delivery=deliv, probe=probe)
            if int(sub["n"].sum()) == 0:
                continue
            kind = str(sub["estimate_kind"].values)
            est = "E[value]" if kind == "mean" else "P(first)"
            lines.append(f"{deliv} / {probe}")
            lines.append(
                f"  {'turn':>4}  {'TVD':>15}  {'|err| of ' + est:>20}  {'model ' + est:>16}"
                f"  {'oracle':>8}  {'n':>3}"
            )
            for t in sub["turn"].values:
                r = sub.sel(turn=t)
                if int(r["n"]) == 0:
                    continue
                lines.append(
                    f"  {int(t):>4}  {_pm(r['tvd_mean'], r['tvd_sem']):>15}  "
                    f"{_pm(r['abs_err_mean'], r['abs_err_sem']):>20}  "
                    f"{_pm(r['estimate_mean'], r['estimate_sem']):>16}  "
                    f"{float(r['oracle_estimate_mean']):>8.3f}  {int(r['n']):>3}"
                )
            lines.append("")
    return "\n".join(lines)


def format_lens_table(table: xr.Dataset, *, every: int = 5) -> str:
    """Plain-text lens TVD by layer (every ``every``-th layer and the last), averaged over turns."""
    lines: list[str] = []
    layers = list(table["layer"].values)
    shown = sorted(set(layers[::every]) | {layers[-1]})
    for deliv in table["delivery"].values:
        for probe in table["probe"].values:
            sub = table["tvd_mean"].sel(delivery=deliv, probe=probe)
            if bool(sub.isnull().all()):
                continue
            by_layer = sub.mean("turn", skipna=True)
            cells = "  ".join(f"L{int(la)}={float(by_layer.sel(layer=la)):.3f}" for la in shown)
            lines.append(f"{deliv} / {probe}: lens TVD to oracle (mean over turns): {cells}")
    return "\n".join(lines)


def _pm(mean: xr.DataArray, sem: xr.DataArray) -> str:
    m = float(mean)
    s = float(sem)
    if np.isnan(m):
        return "-"
    return f"{m:.3f}" if np.isnan(s) else f"{m:.3f}±{s:.3f}"


def format_summary(summary: xr.Dataset, *, every: int = 5) -> str:
    """Plain-text :func:`belieflens.analysis.summary`: TVD to the oracle (mean over turns) per
    layer (every ``every``-th and the last) and source, one block per delivery and probe."""
    tv = summary["tvd_mean"]
    layers = [int(x) for x in tv["layer"].values]
    shown = sorted(set(layers[::every]) | {layers[-1]})
    sources = [str(s) for s in tv["source"].values]
    lines: list[str] = []
    for d in tv["delivery"].values:
        for p in tv["probe"].values:
            sub = tv.sel(delivery=d, probe=p)
            if bool(sub.isnull().all()):
                continue
            by_layer = sub.mean("turn", skipna=True)
            lines.append(f"{d} / {p}: TVD to oracle, mean over turns")
            lines.append("  " + f"{'layer':>5}" + "".join(f"  {s:>10}" for s in sources))
            for la in shown:
                cells = "".join(
                    f"  {_num(by_layer.sel(layer=la, source=s)):>10}" for s in sources
                )
                lines.append(f"  {la:>5}{cells}")
            lines.append("")
    return "\n".join(lines)


def best_layers(summary: xr.Dataset) -> dict[str, tuple[int, float]]:
    """Per source: the layer with the lowest TVD to the oracle (mean over every other dim)."""
    out: dict[str, tuple[int, float]] = {}
    tv = summary["tvd_mean"]
    for s in tv["source"].values:
        m = tv.sel(source=s).mean(["delivery", "probe", "turn"], skipna=True)
        if bool(m.isnull().all()):
            continue
        la = int(m.idxmin("layer"))
        out[str(s)] = (la, float(m.sel(layer=la)))
    return out


def _num(x: xr.DataArray) -> str:
    v = float(x)
    return "-" if np.isnan(v) else f"{v:.3f}"
