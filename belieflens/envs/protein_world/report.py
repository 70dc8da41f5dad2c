"""The ``protein-world`` analysis section: posterior error, downstream gap and experiment choice
per step ``k`` (turn ``k`` = after ``k`` experiments) and delivery, mean ± SEM over episodes,
with the tallies of the stated replies and of the model's experiment choices. Each column is
defined where it is computed, :mod:`belieflens.envs.protein_world.metrics`; this module only
formats it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.dims import TURN
from belieflens.envs.protein_world.metrics import (
    choice_counts,
    stated_tally,
    step_metrics,
    step_summary,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod


def _fmt(m: float, s: float) -> str:
    if not np.isfinite(m):
        return "—"
    return f"{m:.3f}" + (f"±{s:.3f}" if np.isfinite(s) else "")


COLUMNS = (
    ("kl_stated", "KL(oracle‖stated)"),
    ("kl", "KL(oracle‖revealed)"),
    ("stated_parsed", "stated parsed"),
    ("stated_zero_truth", "stated p(θ*)=0"),
    ("gap_stated", "p_act−p_stated(θ*)"),
    ("gap_revealed", "p_act−p_rev(θ*)"),
    ("p_model_true", "p_model(θ*)"),
    ("p_passive_true", "p_pass(θ*)"),
    ("choice_match", "picks max-EIG"),
    ("p_best", "P(max-EIG)"),
    ("eig_regret", "EIG regret"),
    ("ran_best", "ran max-EIG"),
)
"""Columns of the per-step table: metric name and heading, the paper's measure (the KL of the
verbalised posterior, App. F.3.2) first where the file has it, the revealed one beside it."""


def format_steps(summary: xr.Dataset) -> str:
    """The per-step table, one block per delivery."""
    cols = [(n, h) for n, h in COLUMNS if f"{n}_mean" in summary]
    lines = []
    for d in summary["delivery"].values:
        lines.append(f"[{d}]")
        lines.append(f"{'step':>4} {'n':>3} " + " ".join(f"{h:>17}" for _, h in cols))
        for t in summary[TURN].values:
            s = summary.sel(delivery=d, turn=t)
            lines.append(f"{int(t):>4} {int(s['n']):>3} " + " ".join(
                f"{_fmt(float(s[n + '_mean']), float(s[n + '_sem'])):>17}" for n, _ in cols))
    return "\n".join(lines)


def _plot(summary: xr.Dataset, out: Path) -> Path:
    plt = pyplot()
    panels = [(n, h) for n, h in (("kl_stated", "KL(passive oracle ‖ stated) [nats]"),
                                  ("kl", "KL(passive oracle ‖ revealed) [nats]"),
                                  ("gap_stated", "p_active(θ*) − p_stated(θ*)"),
                                  ("gap_revealed", "p_active(θ*) − p_revealed(θ*)"),
                                  ("choice_match", "model picks the max-EIG experiment"))
              if f"{n}_mean" in summary]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (n, h) in zip(axes[0], panels, strict=True):
        for d in summary["delivery"].values:
            m = summary[f"{n}_mean"].sel(delivery=d)
            s = np.nan_to_num(summary[f"{n}_sem"].sel(delivery=d).values)
            t = summary[TURN].values
            ax.plot(t, m.values, marker="o", label=str(d))
            ax.fill_between(t, m.values - s, m.values + s, alpha=0.2)
        if n.startswith("gap"):
            ax.axhline(0.0, color="k", lw=0.8)
        ax.set_title(h, fontsize=9)
        ax.set_xlabel("step k (experiments so far)")
        ax.set_xticks(summary[TURN].values)
        ax.legend(fontsize=7)
    fig.suptitle("ProteinWorld per step (mean ± 1 SEM over episodes)")
    return save(fig, out / "protein_world_steps.png", tight=True)


def _stated_line(t: xr.Dataset) -> str:
    """``; stated replies parsed: P of N (Z give θ* zero mass, S give zero mass to a class the
    oracle keeps)`` of :func:`~belieflens.envs.protein_world.metrics.stated_tally`, or
    nothing without a stated read-out."""
    if "parsed" not in t:
        return ""
    return (f"; stated replies parsed: {int(t['parsed'])} of {int(t['replies'])} "
            f"({int(t['zero_truth'])} of the parsed give θ* zero mass, "
            f"{int(t['zero_support'])} give zero mass to a class the oracle keeps)")


def choice_tally(c: xr.Dataset) -> str:
    """:func:`~belieflens.envs.protein_world.metrics.choice_counts` as one clause: choices by
    EIG under the model's stated posterior and under its revealed belief, by the MCQ, and
    seeded fallbacks, with the MCQ's parsed rotations; ``""`` when the file has no
    model-chosen sequence."""
    if "choices" not in c:
        return ""
    n, fallback = int(c["choices"]), int(c["fallback"])
    text = (f"; experiment choices: {n} ({int(c['eig_stated'])} by EIG under the model's "
            f"stated posterior, {int(c['eig_revealed'])} under its revealed belief, "
            f"{int(c['mcq'])} by the MCQ, {fallback} seeded fallbacks: "
            f"{fallback / max(n, 1):.0%})")
    if "rotations" in c:
        parsed, rot = float(c["rotations_parsed"]), float(c["rotations"])
        text += f"; MCQ rotations parsed: {int(parsed)} of {int(rot)} ({parsed / max(rot, 1):.0%})"
    return text


def protein_world_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod
) -> Section:
    """The ``protein-world`` section: per-step KL, downstream gap and experiment choice."""
    metrics = step_metrics(ds, method=method)
    summary = step_summary(metrics)
    table = format_steps(summary)
    stated = ("KL(oracle ‖ stated), the paper's measure (App. F.3.2): the passive "
              "oracle against the posterior the model states (τ = 1.0), over the replies that "
              "parsed, 'stated parsed' the share that did, a stated 0 floored at 1e-12 (a 0 "
              "where the oracle holds mass p adds p·ln(p/1e-12) nats), 'stated p(θ*)=0' the "
              "share of parsed replies giving the true class zero mass; beside it "
              "KL(oracle ‖ revealed), against the class MCQ's debiased option log-probs; gap "
              "(Fig. 4, as the paper) = active experimenter's p(θ*) after k of its own "
              "experiments minus the model's stated p(θ*) after k, beside it the same minus "
              "its revealed p(θ*); " if "stated_parsed" in metrics else
              "KL(oracle ‖ revealed) in nats: the passive oracle against the class MCQ's "
              "debiased option log-probs (the file has no stated posterior); gap = active "
              "experimenter's p(θ*) after k of its own experiments minus the model's revealed "
              "p(θ*) after k; ")
    note = (
        f"{stated}experiment choice = argmax of the model's debiased next-experiment belief vs "
        "the max-EIG experiment, 'ran max-EIG' whether the experiment run was the max-EIG one "
        "(mean ± 1 SEM, nats)"
    ) + _stated_line(stated_tally(metrics)) + choice_tally(choice_counts(ds))
    md = f"{note}.\n\n```\n{table}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = (_plot(summary, out_dir),)
        md += "\n![per step](protein_world_steps.png)\n"
    return Section(title="ProteinWorld: passive and active oracles", text=f"{note}\n\n{table}",
                   markdown=md, files=files)
