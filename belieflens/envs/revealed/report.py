"""The ``belieflens analyze`` section of the revealed-belief environments (dice, coins,
preference, choice, case study): text and Markdown tables (:class:`belieflens.report.tables.Table`)
and figures of :func:`belieflens.envs.revealed.summary.revealed_summary`, and the section.
"""

from __future__ import annotations

from pathlib import Path
from typing import SupportsFloat

import numpy as np
import xarray as xr

from belieflens.dims import LAYER
from belieflens.envs.revealed.summary import METRICS, VARIANT, revealed_summary, table
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.report.tables import Table, num, pm
from belieflens.types import DebiasMethod

METRIC_NAMES: dict[str, str] = {"chebyshev": "Chebyshev", "l1": "L1", "sym_kl": "sym KL"}
"""Column headings of the distance metrics."""


def _p(p: SupportsFloat) -> str:
    v = float(p)
    if not np.isfinite(v):
        return "-"
    return f"{v:.3f}" if v >= 1e-3 else f"{v:.1e}"


def distance_table(s: xr.DataTree) -> Table:
    """Output-level distances of the revealed belief to the truth, mean ± SEM per variant."""
    d = s["distance"].to_dataset()
    rows = tuple(
        (str(v), str(int(d["n"].sel({VARIANT: v}))),
         *(pm(d[f"{m}_mean"].sel({VARIANT: v}), d[f"{m}_sem"].sel({VARIANT: v}))
           for m in METRICS))
        for v in d[VARIANT].values
    )
    return Table(
        f"Revealed belief vs truth at the output (mean ± SEM over grid points; sym KL with "
        f"truth smoothed by eps={s.attrs['eps']:g})",
        ("variant", "n", *(METRIC_NAMES[m] for m in METRICS)),
        rows,
    )


def accuracy_table(s: xr.DataTree) -> Table:
    """StaA vs RevB per variant with McNemar's exact test and significance marks."""
    a = s["accuracy"].to_dataset()
    rows = []
    for v in a[VARIANT].values:
        r = a.sel({VARIANT: v})
        diff = float(r["diff"])
        rows.append((
            str(v), str(int(r["n"])), num(r["staa"]), num(r["revb"]),
            "-" if not np.isfinite(diff) else f"{diff:+.3f}{r['mark'].item()}",
            _p(r["p_value"]), f"{num(r['staa_all'])} ({int(r['n_all'])})",
        ))
    return Table(
        "Accuracy where the truth has a unique mode: StaA = stated answer picks the correct "
        "candidate, RevB = revealed argmax is the mode (McNemar exact p; * <.05 ** <.01 *** <.001)",
        ("variant", "n", "StaA", "RevB", "RevB-StaA", "p", "StaA all (n)"),
        tuple(rows),
    )


def _scoring(s: xr.DataTree) -> str:
    if s.attrs["lens_scoring"] == "first-token":
        return "multi-token outcomes scored by their first token only"
    return f"multi-token outcomes scored: {s.attrs['lens_scoring']}"


def _shown_layers(layers: list[int], every: int) -> list[int]:
    return sorted(set(layers[::every]) | {layers[-1]})


def lens_distance_table(s: xr.DataTree, metric: str = "l1", *, every: int = 5) -> Table | None:
    """``metric`` of the revealed lens belief to the truth by layer (every ``every``-th, last)."""
    lens = table(s, "lens_distance")
    if lens is None:
        return None
    d = lens[f"{metric}_mean"]
    layers = _shown_layers([int(x) for x in d[LAYER].values], every)
    rows = tuple(
        (str(v), *(num(d.sel({VARIANT: v, LAYER: la})) for la in layers))
        for v in d[VARIANT].values
    )
    return Table(
        f"Logit lens: {METRIC_NAMES[metric]} of the revealed belief to the truth by layer "
        f"(mean over grid points; {_scoring(s)})",
        ("variant", *(f"L{la}" for la in layers)),
        rows,
    )


def lens_accuracy_table(s: xr.DataTree, *, every: int = 5) -> Table | None:
    """StaA and RevB by layer, per variant (grid points with a unique mode)."""
    a = table(s, "lens_accuracy")
    if a is None:
        return None
    layers = _shown_layers([int(x) for x in a[LAYER].values], every)
    rows = tuple(
        (f"{v} {name}", *(num(a[var].sel({VARIANT: v, LAYER: la})) for la in layers))
        for v in a[VARIANT].values
        if int(a["n"].sel({VARIANT: v}).max()) > 0
        for var, name in (("staa", "StaA"), ("revb", "RevB"))
    )
    if not rows:
        return None
    return Table("Logit lens: StaA and RevB by layer (grid points with a unique mode)",
                 ("variant", *(f"L{la}" for la in layers)), rows)


def bias_table(s: xr.DataTree) -> Table | None:
    """First-option mass where all outcomes are equally likely, next to 1/|O|."""
    b = s["bias"].to_dataset()
    if b.sizes.get(VARIANT, 0) == 0:
        return None
    rows = tuple(
        (str(v), str(int(b["n"].sel({VARIANT: v}))),
         pm(b["p_first_mean"].sel({VARIANT: v}), b["p_first_sem"].sel({VARIANT: v})),
         num(b["expected"].sel({VARIANT: v})),
         pm(b["stated_a_mean"].sel({VARIANT: v}), b["stated_a_sem"].sel({VARIANT: v})),
         num(b["stated_expected"].sel({VARIANT: v})))
        for v in b[VARIANT].values
    )
    return Table(
        "Position and label bias where all outcomes are equally likely: revealed mass on the "
        "first listed outcome, stated raw mass on [[A]] (before debiasing)",
        ("variant", "n", "P(first) revealed", "1/|O|", "P([[A]]) stated", "1/5"),
        rows,
    )


def tables(s: xr.DataTree) -> list[Table]:
    """Every table that has data, in report order."""
    out: list[Table | None] = [
        distance_table(s), accuracy_table(s), bias_table(s),
        lens_distance_table(s, "l1"), lens_distance_table(s, "sym_kl"), lens_accuracy_table(s),
    ]
    return [t for t in out if t is not None]


def accuracy_bars(s: xr.DataTree, out: Path, title: str) -> Path:
    """Grouped bars StaA vs RevB per variant, exact 95% CIs, significance marks above pairs.

    Where no grid point has a unique mode (RevB undefined), StaA over all grid points is drawn.
    """
    plt = pyplot()
    a = s["accuracy"].to_dataset()
    paired = [str(v) for v in a[VARIANT].values if int(a["n"].sel({VARIANT: v})) > 0]
    fig, ax = plt.subplots(figsize=(max(4.5, 1.3 * max(len(a[VARIANT]), 1) + 2), 3.8))
    if paired:
        x = np.arange(len(paired))
        w = 0.38
        for off, var, name, color in ((-w / 2, "staa", "StaA (stated)", "#4C72B0"),
                                      (w / 2, "revb", "RevB (revealed)", "#DD8452")):
            sub = a.sel({VARIANT: paired})
            val = np.asarray(sub[var].values, dtype=float)
            err = np.stack([val - sub[f"{var}_low"].values, sub[f"{var}_high"].values - val])
            ax.bar(x + off, val, w, yerr=err, capsize=3, label=name, color=color)
            for xi, vi in zip(x + off, val, strict=True):
                ax.text(xi, 0.015, f"{vi:.2f}", ha="center", va="bottom", fontsize=7,
                        color="white" if vi > 0.08 else "black")
        for i, v in enumerate(paired):
            r = a.sel({VARIANT: v})
            mark = str(r["mark"].item())
            top = float(max(r["staa_high"], r["revb_high"]))
            if mark:
                ax.text(i, min(top + 0.03, 1.07), mark, ha="center", fontsize=11)
        ax.set_xticks(x, [f"{v}\n(n={int(a['n'].sel({VARIANT: v}))})" for v in paired])
        ax.set_ylabel("accuracy")
    else:
        labels = [str(v) for v in a[VARIANT].values]
        ax.bar(np.arange(len(labels)), np.asarray(a["staa_all"].values, dtype=float), 0.5,
               color="#4C72B0", label="StaA (stated), all grid points")
        ax.set_xticks(np.arange(len(labels)),
                      [f"{v}\n(n={int(a['n_all'].sel({VARIANT: v}))})" for v in labels])
        ax.text(0.5, 0.75, "no grid point has a unique mode:\nRevB undefined",
                transform=ax.transAxes, ha="center", fontsize=8, color="grey")
        ax.set_ylabel("accuracy")
    ax.axhline(0.2, color="grey", lw=0.8, ls=":", label="StaA chance (1/5)")
    ax.set_ylim(0, 1.12)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(title, fontsize=10)
    return save(fig, out, tight=True)


def lens_plot(s: xr.DataTree, out: Path, title: str) -> Path | None:
    """Per-layer L1 and sym KL of the revealed belief to the truth, and StaA/RevB per layer.

    The output-level value (all tokens of each outcome scored) is drawn as a
    diamond right of the last layer.
    """
    ld, la = table(s, "lens_distance"), table(s, "lens_accuracy")
    if ld is None or la is None:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    layers = np.asarray(ld[LAYER].values)
    out_x = layers[-1] + 1.5
    for ax, m in zip(axes[:2], ("l1", "sym_kl"), strict=True):
        for v in ld[VARIANT].values:
            line = ax.plot(layers, ld[f"{m}_mean"].sel({VARIANT: v}).values, label=str(v))
            ax.plot([out_x], [float(s["distance"][f"{m}_mean"].sel({VARIANT: v}))], "D",
                    color=line[0].get_color())
        ax.set_xlabel("layer (0 = embeddings; ◆ = output)")
        ax.set_ylabel(f"{METRIC_NAMES[m]} to truth")
        ax.set_title(f"revealed belief: {METRIC_NAMES[m]}")
        if m == "l1":
            ax.set_ylim(0, 2.02)
        ax.legend(fontsize=7)
    ax = axes[2]
    pooled = str(la[VARIANT].values[-1])
    row = la.sel({VARIANT: pooled})
    if int(row["n"].max()) > 0:
        ax.plot(layers, row["staa"].values, label="StaA (stated)", color="#4C72B0")
        ax.plot(layers, row["revb"].values, label="RevB (revealed)", color="#DD8452")
        acc = s["accuracy"].to_dataset().sel({VARIANT: pooled})
        ax.plot([out_x], [float(acc["staa"])], "D", color="#4C72B0")
        ax.plot([out_x], [float(acc["revb"])], "D", color="#DD8452")
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no grid point has a unique mode", transform=ax.transAxes,
                ha="center")
    ax.axhline(0.2, color="grey", lw=0.8, ls=":")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("layer (0 = embeddings; ◆ = output)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"accuracy by layer ({pooled}, n={int(row['n'].max())})")
    fig.suptitle(title, fontsize=10)
    return save(fig, out, tight=True)


GUIDE = """Every grid point is read out twice. The **revealed belief** (RevB) is the model's
distribution over the outcome continuations of a prompt that ends right before the
outcome; it is compared with the exact distribution (the truth) by Chebyshev distance,
L1 distance and symmetric KL (the truth smoothed additively so that outcomes it rules
out do not make the KL infinite). The **stated answer** (StaA) is the same scenario as
a question about one outcome's probability with five candidates (the paper's fractions
by default), debiased over their five rotations; it is right when its most likely
candidate is the correct one. With `stated=every` (the default) each possible outcome
gets its own question: StaA over every question is `staa_all`. Where the truth has a
unique mode, RevB is right when the revealed belief's argmax is that mode; it is paired
with the stated question about that mode (the grid point's first item) and the two
accuracies are compared on the same grid points with McNemar's exact test."""


def revealed_section(ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod) -> Section:
    """Revealed belief vs stated answer: distance and accuracy tables, bias, lens, figures."""
    env = str(ds.attrs.get("env_name", ""))
    summary = revealed_summary(ds, method=method)
    ts = tables(summary)
    text = "\n\n".join(t.text() for t in ts)
    files: list[Path] = []
    figures = ""
    if out_dir is not None:
        bars = accuracy_bars(summary, out_dir / "revealed_accuracy.png",
                             f"{env}: stated answer (StaA) vs revealed belief (RevB)")
        files.append(bars)
        figures += f"![StaA vs RevB]({bars.name})\n\n"
        lens = lens_plot(summary, out_dir / "revealed_lens.png",
                         f"{env}: revealed belief vs truth, and accuracy, by layer")
        if lens is not None:
            files.append(lens)
            figures += f"![by layer]({lens.name})\n\n"
    markdown = f"{GUIDE}\n\n{figures}" + "\n\n".join(t.markdown() for t in ts)
    return Section(title="Revealed belief vs stated answer", text=text, markdown=markdown,
                   files=tuple(files))
