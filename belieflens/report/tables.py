"""Plain-text tables of a study's computed results (the xarray tables of
:mod:`belieflens.analysis`), a titled :class:`Table` of text cells that renders as aligned text
or Markdown, and the number formats every report shares (:func:`pm`, :func:`num`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import SupportsFloat, TypeVar

import numpy as np
import xarray as xr

Tab = TypeVar("Tab", xr.Dataset, xr.DataArray)


def cells(table: Tab, keep: Callable[[Tab], bool]) -> Iterator[tuple[str, str, Tab]]:
    """Each (delivery, probe) of ``table`` and its selection, where ``keep`` of it holds: the
    blocks of a table, the panels of a figure."""
    for d in table["delivery"].values:
        for p in table["probe"].values:
            sub = table.sel(delivery=d, probe=p)
            if keep(sub):
                yield str(d), str(p), sub


def has_values(x: xr.DataArray) -> bool:
    """Whether ``x`` holds a value that is not NaN."""
    return not bool(x.isnull().all())


def format_turn_table(table: xr.Dataset) -> str:
    """Plain-text rendering of :func:`~belieflens.analysis.tables.turn_table`, one block per
    delivery and probe."""
    lines: list[str] = []
    for deliv, probe, sub in cells(table, lambda s: int(s["n"].sum()) > 0):
        kind = str(sub["estimate_kind"].values)
        est = "E[value]" if kind == "mean" else "P(first)"
        lines.append(f"{deliv} / {probe}")
        lines.append(f"  {'turn':>4}  {'TVD':>15}  {'|err| of ' + est:>20}  "
                     f"{'model ' + est:>16}  {'oracle':>8}  {'n':>3}")
        for t in sub["turn"].values:
            r = sub.sel(turn=t)
            if int(r["n"]) == 0:
                continue
            lines.append(f"  {int(t):>4}  {pm(r['tvd_mean'], r['tvd_sem']):>15}  "
                         f"{pm(r['abs_err_mean'], r['abs_err_sem']):>20}  "
                         f"{pm(r['estimate_mean'], r['estimate_sem']):>16}  "
                         f"{float(r['oracle_estimate_mean']):>8.3f}  {int(r['n']):>3}")
        lines.append("")
    return "\n".join(lines)


def format_lens_table(table: xr.Dataset, *, every: int = 5) -> str:
    """Plain-text lens TVD by layer (every ``every``-th layer and the last), averaged over turns."""
    lines: list[str] = []
    layers = list(table["layer"].values)
    shown = sorted(set(layers[::every]) | {layers[-1]})
    for deliv, probe, sub in cells(table["tvd_mean"], has_values):
        by_layer = sub.mean("turn", skipna=True)
        row = "  ".join(f"L{int(la)}={float(by_layer.sel(layer=la)):.3f}" for la in shown)
        lines.append(f"{deliv} / {probe}: lens TVD to oracle (mean over turns): {row}")
    return "\n".join(lines)


def format_summary(summary: xr.Dataset, *, every: int = 5) -> str:
    """Plain-text :func:`belieflens.analysis.summary`: TVD to the oracle (mean over turns) per
    layer (every ``every``-th and the last) and source, one block per delivery and probe."""
    tv = summary["tvd_mean"]
    layers = [int(x) for x in tv["layer"].values]
    shown = sorted(set(layers[::every]) | {layers[-1]})
    sources = [str(s) for s in tv["source"].values]
    lines: list[str] = []
    for d, p, sub in cells(tv, has_values):
        by_layer = sub.mean("turn", skipna=True)
        lines.append(f"{d} / {p}: TVD to oracle, mean over turns")
        lines.append("  " + f"{'layer':>5}" + "".join(f"  {s:>10}" for s in sources))
        for la in shown:
            row = "".join(f"  {num(by_layer.sel(layer=la, source=s)):>10}" for s in sources)
            lines.append(f"  {la:>5}{row}")
        lines.append("")
    return "\n".join(lines)


def format_baselines(b: xr.Dataset, *, every: int = 5) -> str:
    """Plain-text :func:`belieflens.analysis.baselines.baselines`: per delivery and probe each
    statistic baseline's TVD to the oracle (mean over turns), and the decoders' selectivity
    against the best per layer (every ``every``-th and the last)."""
    tv = b["tvd_mean"].mean("turn", skipna=True)
    lines = ["statistic baselines (the decoders' estimator and folds on features of the "
             "evidence): held-out TVD to the oracle, mean over turns; decoder selectivity = "
             "best baseline's TVD - decoder's, positive = beyond every baseline"]
    for d, p, sub in cells(tv, has_values):
        vals = " · ".join(f"{n!s} {num(sub.sel(baseline=n))}" for n in sub["baseline"].values)
        lines.append(f"{d} / {p}: {vals}")
        if "selectivity" not in b:
            continue
        sel = b["selectivity"].sel(delivery=d, probe=p)
        layers = [int(x) for x in sel["layer"].values]
        shown = sorted(set(layers[::every]) | {layers[-1]})
        row = "  ".join(f"L{la}={float(sel.sel(layer=la)):+.3f}" for la in shown)
        lines.append(f"  decoder vs {b['best'].sel(delivery=d, probe=p).values!s}: {row}")
    return "\n".join(lines)


def format_position_bias(table: xr.Dataset) -> str:
    """Plain-text rendering: per probe, TVD of each rotation and the excess of each position."""
    lines: list[str] = []
    for d, p, sub in cells(table, lambda s: int(s["rotation_n"].sum()) > 0):
        rot = "  ".join(f"r{int(r)}={float(v):.3f}" for r, v in zip(
            sub["rotation"].values, sub["rotation_tvd_mean"].values, strict=True)
            if np.isfinite(v))
        pos = "  ".join(f"p{int(j)}={float(v):+.3f}" for j, v in zip(
            sub["option"].values, sub["position_excess_mean"].values, strict=True)
            if np.isfinite(v))
        lines.append(f"{d} / {p}: TVD(rotation, debiased) {rot} | position excess {pos}")
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


def pm(mean: SupportsFloat, sem: SupportsFloat) -> str:
    """``mean±sem`` to 3 decimals; ``mean`` alone without a SEM; ``-`` for a missing mean."""
    m = float(mean)
    s = float(sem)
    if np.isnan(m):
        return "-"
    return f"{m:.3f}" if np.isnan(s) else f"{m:.3f}±{s:.3f}"


def num(x: SupportsFloat) -> str:
    """A value to 3 decimals, ``-`` where missing."""
    v = float(x)
    return "-" if np.isnan(v) else f"{v:.3f}"


@dataclass(frozen=True)
class Table:
    """A table of text cells with a title, renderable as aligned text or Markdown."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def text(self) -> str:
        """Aligned plain text: title line, header, rows."""
        cells = [self.header, *self.rows]
        widths = [max(len(r[j]) for r in cells) for j in range(len(self.header))]
        lines = [self.title]
        for r in cells:
            first = r[0].ljust(widths[0])
            rest = "  ".join(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))
            lines.append(f"  {first}  {rest}")
        return "\n".join(lines)

    def markdown(self) -> str:
        """A Markdown table preceded by the title in bold."""
        head = "| " + " | ".join(self.header) + " |"
        rule = "|" + "|".join(["---"] + ["---:"] * (len(self.header) - 1)) + "|"
        body = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in self.rows]
        return "\n".join([f"**{self.title}**", "", head, rule, *body])


def _num(x: SupportsFloat, digits: int = 3) -> str:
    v = float(x)
    return "-" if not np.isfinite(v) else f"{v:.{digits}f}"


def _pm(mean: SupportsFloat, sem: SupportsFloat, digits: int = 3) -> str:
    m, s = float(mean), float(sem)
    if not np.isfinite(m):
        return "-"
    return f"{m:.{digits}f}" if not np.isfinite(s) else f"{m:.{digits}f}±{s:.{digits}f}"
