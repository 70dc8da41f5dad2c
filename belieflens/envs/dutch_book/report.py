"""The ``dutch-book`` analysis section: violations, Dutch books and sure losses per scenario,
formatted from :mod:`belieflens.envs.dutch_book.metrics`.

Per scenario (one episode) the credences in the scenario's listed order are scored by the hand
construction for its kind and by the general linear program, which also proves coherence when
no book exists. Summaries per kind and delivery: mean sure loss ± SEM, the rate of *material*
violations (hand sure loss above :data:`belieflens.envs.dutch_book.metrics.MATERIAL_LOSS`) and
the rate of LP-detected incoherence (any loss). Per layer, the logit lens credences are scored
with the hand construction.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.envs.dutch_book.metrics import (
    MATERIAL_LOSS,
    kind_summary,
    lens_sure_loss,
    scenario_scores,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod


def _fmt(x: float, digits: int = 3) -> str:
    return "  nan" if not np.isfinite(x) else f"{x:.{digits}f}"


def _scenario_table(scores: xr.Dataset) -> str:
    lines = [f"{'delivery':<12} {'ep':>3} {'scenario':<26} {'kind':<14} {'credences (listed)':<38}"
             f" {'hand':>6} {'LP':>6}  LP stakes"]
    for d in scores["delivery"].values:
        for s in (scores.sel(delivery=d, episode=e) for e in scores["episode"].values):
            if not bool(s["scored"]):
                continue
            asked = np.isfinite(s["credence"].values)
            cred = " ".join(f"{c:.2f}" for c in s["credence"].values[asked])
            stakes = " ".join(f"{x:+.2f}" for x in s["lp_stakes"].values[asked]) if not bool(
                s["coherent"]) else "coherent"
            lines.append(f"{d!s:<12} {int(s['episode']):>3} {str(s['scenario'].values)[:26]:<26} "
                         f"{s['kind'].values!s:<14} {cred:<38} "
                         f"{_fmt(float(s['hand_loss'])):>6} {_fmt(float(s['lp_loss'])):>6}  "
                         f"{stakes}")
    return "\n".join(lines)


def _summary_table(summary: xr.Dataset) -> str:
    deliveries = [str(d) for d in summary["delivery"].values]
    head = f"{'kind':<15}" + "".join(
        f" | {d + ': loss ± SEM':<26} {'LP':>5} {'mat.':>5} {'LP inc.':>7} {'|c-.5|':>6} {'n':>3}"
        for d in deliveries
    )
    lines = [head]
    for k in summary["kind"].values:
        row = f"{k!s:<15}"
        for d in deliveries:
            s = summary.sel(kind=k, delivery=d)
            n = int(s["n"])
            row += (f" | {_fmt(float(s['loss_mean'])) + ' ± ' + _fmt(float(s['loss_sem'])):<26}"
                    f" {_fmt(float(s['lp_loss_mean'])):>5}"
                    f" {_fmt(float(s['material_rate']), 2):>5}"
                    f" {_fmt(float(s['incoherent_rate']), 2):>7}"
                    f" {_fmt(float(s['decisiveness'])):>6} {n:>3}")
        lines.append(row)
    return "\n".join(lines)


def _lens_line(lens: xr.DataArray) -> str:
    mean = lens.mean("episode", skipna=True)
    parts = []
    for d in mean["delivery"].values:
        m = mean.sel(delivery=d)
        if bool(m.isnull().all()):
            continue
        peak = int(m.fillna(-np.inf).argmax("layer"))
        parts.append(f"{d}: largest mean sure loss at layer {peak} ({float(m[peak]):.3f}), "
                     f"last layer {float(m[-1]):.3f}")
    return ("logit lens (hand books; early layers give credences near 0.5, which are trivially "
            "coherent): " + ("; ".join(parts) if parts else "no data"))


def _plots(summary: xr.Dataset, lens: xr.DataArray, out: Path) -> tuple[Path, ...]:
    plt = pyplot()
    bar = out / "dutch_book_loss.png"
    kinds = [str(k) for k in summary["kind"].values]
    deliveries = [str(d) for d in summary["delivery"].values]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / max(1, len(deliveries))
    x = np.arange(len(kinds))
    for j, d in enumerate(deliveries):
        s = summary.sel(delivery=d)
        ax.bar(x + j * width, s["loss_mean"].values, width,
               yerr=np.nan_to_num(s["loss_sem"].values), capsize=3, label=d)
    ax.set_xticks(x + width * (len(deliveries) - 1) / 2, kinds)
    ax.set_ylabel("sure loss per ticket (mean ± 1 SEM)")
    ax.set_title("Dutch books against the model's credences")
    ax.legend(fontsize=8)
    save(fig, bar, tight=True)
    curve = out / "dutch_book_lens.png"
    fig, ax = plt.subplots(figsize=(7, 3.8))
    mean = lens.mean("episode", skipna=True)
    for d in mean["delivery"].values:
        ax.plot(mean["layer"].values, mean.sel(delivery=d).values, marker=".", label=str(d))
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel("mean sure loss (hand book)")
    ax.set_title("Logit lens: coherence of each layer's credences")
    ax.legend(fontsize=8)
    save(fig, curve, tight=True)
    return bar, curve


def dutch_book_section(ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod) -> Section:
    """The ``dutch-book`` section: per-scenario books, per-kind summary, lens per layer."""
    scores = scenario_scores(ds, method=method)
    summary = kind_summary(scores)
    lens = lens_sure_loss(ds, method=method)
    scen = _scenario_table(scores)
    summ = _summary_table(summary)
    lens_text = _lens_line(lens)
    readout = (
        "credence = P(Yes) renormalised over Yes/No (answer variants summed), "
        f"{method} mean over both answer orders; sure loss in units of one ticket paying 1; "
        f"mat. = rate of hand sure loss > {MATERIAL_LOSS}; LP inc. = rate of scenarios the "
        "linear program proves incoherent (any loss); hand = the book for the scenario's kind "
        "(unit stakes), LP = the linear program's book of maximal sure loss with every stake "
        "in [-1, 1], so it can exceed the hand book's; |c-.5| = mean distance of the credences "
        "from 0.5"
    )
    text = f"{readout}\n\n{summ}\n\n{lens_text}\n\n{scen}"
    files: tuple[Path, ...] = ()
    md = f"{readout}.\n\n```\n{summ}\n```\n\n{lens_text}\n"
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = _plots(summary, lens, out_dir)
        md += "\n![sure loss per kind](dutch_book_loss.png)\n\n![lens](dutch_book_lens.png)\n"
    md += f"\n### Per scenario\n\n```\n{scen}\n```\n"
    return Section(title="Dutch-book coherence", text=text, markdown=md, files=files)
