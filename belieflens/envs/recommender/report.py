"""The ``recommender`` analysis section: type and rating beliefs against the exact posterior,
per delivery and turn, mean ± SEM over episodes. Each score is defined where it is computed,
:func:`belieflens.envs.recommender.metrics.recommender_scores`; this module only formats it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.dims import TURN
from belieflens.envs.recommender.metrics import (
    MAE_METRICS,
    TVD_METRICS,
    after_evidence,
    recommender_scores,
    score_table,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.report.tables import pm
from belieflens.types import DebiasMethod


def format_table(table: xr.Dataset) -> str:
    """Plain-text table: one row per (delivery, turn), one column per score (mean±SEM)."""
    names = [n for n in (*TVD_METRICS, *MAE_METRICS) if f"{n}_mean" in table]
    header = f"{'delivery':<16} {'turn':>4} " + " ".join(f"{n:>16}" for n in names) + "    n"
    lines = [header]
    for d in table["delivery"].values:
        for t in table[TURN].values:
            cells = [
                pm(float(table[f"{n}_mean"].sel(delivery=d, turn=t)),
                    float(table[f"{n}_sem"].sel(delivery=d, turn=t)))
                for n in names
            ]
            n = int(table["n"].sel(delivery=d, turn=t))
            lines.append(f"{d!s:<16} {int(t):>4} " + " ".join(f"{c:>16}" for c in cells)
                         + f" {n:>4}")
    return "\n".join(lines)


def plot(table: xr.Dataset, out: Path) -> Path:
    """TVD (left) and MAE in stars (right) per turn, one row per delivery, mean ± 1 SEM."""
    plt = pyplot()
    deliveries = [str(d) for d in table["delivery"].values]
    fig, axes = plt.subplots(len(deliveries), 2, figsize=(11, 3.4 * len(deliveries)),
                             squeeze=False)
    turns = table[TURN].values
    for row, d in zip(axes, deliveries, strict=True):
        for ax, names, ylabel in ((row[0], TVD_METRICS, "TVD to oracle"),
                                  (row[1], MAE_METRICS, "MAE (stars)")):
            for n in names:
                if f"{n}_mean" not in table:
                    continue
                m = table[f"{n}_mean"].sel(delivery=d).values
                s = np.nan_to_num(table[f"{n}_sem"].sel(delivery=d).values)
                ax.plot(turns, m, marker="o", label=n)
                ax.fill_between(turns, m - s, m + s, alpha=0.15)
            ax.set_title(f"{d}")
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.set_xlabel("turn (ratings seen)")
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=7)
    fig.suptitle("Recommender: type (z) and target rating (y) vs the exact posterior")
    return save(fig, out, tight=True)


def recommender_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod = "geometric"
) -> Section:
    """The recommender section: TVD for z and y, MAE for y, both aggregations of p(y | x, z)."""
    table = score_table(recommender_scores(ds, method=method))
    text = format_table(table)
    overall = after_evidence(table)
    summary = "after evidence (turns ≥ 1, all deliveries): " + ", ".join(
        f"{n} {float(v):.3f}" for n, v in overall.data_vars.items()
    )
    text = f"{text}\n{summary}"
    files: tuple[Path, ...] = ()
    md = (
        "Type belief (z) and target-rating belief (y) against the exact posterior and "
        "posterior predictive; `*_argmax`: the type-conditional rating at the model's most "
        "likely type, `*_marginal`: marginalised over its type belief; `mae_y_true`: against "
        "the user's actual rating. Mean ± SEM over episodes.\n\n"
    )
    if out_dir is not None:
        files = (plot(table, out_dir / "recommender.png"),)
        md += "![recommender scores](recommender.png)\n\n"
    md += f"```\n{text}\n```\n"
    return Section(title="Recommender: type and rating", text=text, markdown=md, files=files)
