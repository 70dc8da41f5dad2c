"""The ``social-judgment`` / ``medical-triage`` analysis section: no oracle, so invariance,
accuracy and passive-vs-active gaps, formatted from :mod:`belieflens.envs.judgment.metrics`.

Scores use the label belief (``verdict`` / ``urgency`` probe) at each episode's
last turn (the whole story told), against the case's ground truth
(``truth_label_index``); episodes are grouped by ``truth_case``,
``truth_engagement`` and ``truth_style`` (``clean`` for passive episodes).

- **Accuracy and MAE** per delivery and style, mean ± SEM over episodes, and
  accuracy per turn. MAE is |E[level] − true level| on the label scale
  (urgency levels 0 = Emergency … 3 = Routine; for YTA/NTA it is 1 − p(true)).
- **Invariance** (active episodes, per case): the mean TVD of each style's
  label distribution from the styles' average (0 = the belief does not depend
  on the style), and the range of E[level] across styles; mean ± SEM over cases.
- **Passive − active gaps** per case (accuracy and absolute error), averaged
  over styles, mean ± SEM over cases. Invariance and gaps leave out active
  episodes with a failed simulation (``truth_sim_failures`` > 0): some of their
  segments were delivered as clean text, not in the assigned style.
- **Confusion matrices** (true label × the model's most likely label) per
  delivery and engagement.
- Triage only: the style posterior's accuracy on active episodes, and the
  urgency conditioned on the model's most likely style (``urgency|style=…``
  probe at the argmax of the ``style`` probe), scored like the direct urgency.
- Simulator failures (segments delivered clean after every attempt failed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.stats import mean_sem
from belieflens.dims import EPISODE, TURN
from belieflens.envs.judgment.metrics import (
    CASE_DIM,
    accuracy,
    accuracy_table,
    confusions,
    gaps,
    invariance,
    judgment_data,
    simulator_failures,
    triage,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod


def _pm(t: xr.Dataset, name: str, fmt: str = ".3f") -> str:
    mean, sem = float(t[f"{name}_mean"]), float(t[f"{name}_sem"])
    if not np.isfinite(mean):
        return "-"
    return f"{mean:{fmt}}±{sem:{fmt}}" if np.isfinite(sem) else f"{mean:{fmt}}"


def _left_out(t: xr.Dataset) -> str:
    n = int(t.attrs["left_out"])
    return (f"\n(left out: {n} active episode(s) whose simulator failed on some "
            "segment, so it was delivered clean)") if n else ""


def format_accuracy(t: xr.Dataset) -> str:
    """:func:`~belieflens.envs.judgment.metrics.accuracy_table` as text."""
    lines = [f"{'delivery':<16} {'style':<15} {'accuracy':>14} {'MAE':>14} {'n':>4}"]
    for dl in t["delivery"].values:
        for s in t["style"].values:
            r = t.sel(delivery=dl, style=s)
            lines.append(f"{dl:<16} {s:<15} {_pm(r, 'acc'):>14} {_pm(r, 'err'):>14} "
                         f"{int(r['n']):>4}")
    return "\n".join(lines)


def format_invariance(t: xr.Dataset) -> str:
    """:func:`~belieflens.envs.judgment.metrics.invariance` as text."""
    if "spread" not in t:
        return ("needs active episodes in at least 2 styles "
                f"(found {t.attrs['styles']}): run with engagement=active or both") + _left_out(t)
    deliveries = [str(x) for x in t["delivery"].values]
    lines = [f"{'delivery':<16} {'style TVD spread':>18} {'E[level] range':>16} {'cases':>6}"]
    for dl in deliveries:
        r = t.sel(delivery=dl)
        lines.append(f"{dl:<16} {_pm(r, 'spread'):>18} {_pm(r, 'level'):>16} {int(r['n']):>6}")
    lines.append("per case (style TVD spread, by delivery): " + "; ".join(
        f"{c}: " + ", ".join(f"{float(t['spread'].sel(delivery=dl, case=c)):.3f}"
                             for dl in deliveries)
        for c in t[CASE_DIM].values))
    return "\n".join(lines) + _left_out(t)


def format_gaps(t: xr.Dataset) -> str:
    """:func:`~belieflens.envs.judgment.metrics.gaps` as text."""
    if "acc_mean" not in t:
        return "needs both passive and active episodes: run with engagement=both" + _left_out(t)
    deliveries = [str(x) for x in t["delivery"].values]
    lines = [f"{'delivery':<16} {'accuracy gap':>14} {'abs-err gap':>14} {'cases':>6}"]
    for dl in deliveries:
        r = t.sel(delivery=dl)
        lines.append(f"{dl:<16} {_pm(r, 'acc'):>14} {_pm(r, 'err'):>14} {int(r['n']):>6}")
    by_style = t["acc_by_style"]
    lines.append("accuracy gap by style (mean over cases): " + "; ".join(
        f"{dl}: " + ", ".join(f"{s} {float(by_style.sel(delivery=dl, style=s)):+.3f}"
                              for s in by_style["style"].values)
        for dl in deliveries))
    return "\n".join(lines) + _left_out(t)


def format_confusions(m: xr.DataArray) -> str:
    """:func:`~belieflens.envs.judgment.metrics.confusions` as text, one block per delivery
    and engagement."""
    labels = [str(x) for x in m["truth"].values]
    width = max(len(x) for x in labels) + 2
    blocks = []
    for dl in m["delivery"].values:
        for eng in m["engagement"].values:
            cm = m.sel(delivery=dl, engagement=eng).values
            rows = [f"{dl} / {eng} (rows: truth, columns: predicted)",
                    " " * width + "".join(f"{x:>{width}}" for x in labels)]
            for i, lab in enumerate(labels):
                rows.append(f"{lab:<{width}}" + "".join(f"{int(v):>{width}}" for v in cm[i]))
            blocks.append("\n".join(rows))
    return "\n\n".join(blocks)


def format_triage(t: xr.Dataset) -> str:
    """:func:`~belieflens.envs.judgment.metrics.triage` as text (empty without a style probe)."""
    if "style_mean" not in t:
        return ""
    lines = [f"{'delivery':<16} {'style acc':>12} {'urg acc|style':>14} "
             f"{'urg MAE|style':>14} {'n':>4}"]
    for dl in t["delivery"].values:
        r = t.sel(delivery=dl)
        if "cond_acc_mean" in t:
            cond_cells = f"{_pm(r, 'cond_acc'):>14} {_pm(r, 'cond_err'):>14} {int(r['n']):>4}"
        else:
            cond_cells = f"{'-':>14} {'-':>14} {'-':>4}"
        lines.append(f"{dl:<16} {_pm(r, 'style'):>12} {cond_cells}")
    lines.append("style acc: the model's most likely style is the simulator's (active "
                 "episodes); urg …|style: urgency asked with that style written into the "
                 "prompt (all episodes)")
    return "\n".join(lines)


def format_failures(f: xr.Dataset) -> str:
    """:func:`~belieflens.envs.judgment.metrics.simulator_failures` as one line (empty
    without a simulation)."""
    if "failed" not in f:
        return ""
    text = (f"simulator: {int(f['failed'])} segment(s) failed every attempt (delivered clean) "
            f"in {int(f['episodes'])} active episode(s)")
    if "calls" in f:
        text += f"; {int(f['calls'])} simulator calls"
    return text


def plot(d: xr.Dataset, matrices: xr.DataArray, out: Path) -> Path:
    """Accuracy per turn (per delivery and engagement) and the confusion matrices."""
    plt = pyplot()
    pairs = [(str(dl), str(eng)) for dl in matrices["delivery"].values
             for eng in matrices["engagement"].values]
    labels = [str(x) for x in matrices["truth"].values]
    turn_accuracy = accuracy(d["belief"], d["truth"])
    fig, axes = plt.subplots(1, 1 + len(pairs), figsize=(5 + 3.6 * len(pairs), 3.8),
                             squeeze=False)
    ax = axes[0][0]
    for dl in turn_accuracy["delivery"].values:
        for eng in matrices["engagement"].values:
            mask = (d["engagement"] == eng).values
            sub = turn_accuracy.sel(delivery=dl).isel({EPISODE: mask})
            ms = mean_sem(sub, EPISODE)
            turns = sub[TURN].values
            m = ms["mean"].values
            s = np.nan_to_num(ms["sem"].values)
            ax.plot(turns, m, marker="o", label=f"{dl} / {eng}")
            ax.fill_between(turns, m - s, m + s, alpha=0.15)
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("turn (segments told)")
    ax.set_ylabel(f"accuracy of the {d.attrs['probe']}")
    ax.set_title("accuracy per turn (mean ± 1 SEM)")
    ax.legend(fontsize=7)
    for ax, (dl, eng) in zip(axes[0][1:], pairs, strict=True):
        cm = matrices.sel(delivery=dl, engagement=eng).values
        ax.imshow(cm, cmap="Blues")
        ax.set_xticks(range(len(labels)), labels, rotation=45, fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        for i in range(len(labels)):
            for j in range(len(labels)):
                v = int(cm[i, j])
                ax.text(j, i, str(v), ha="center", va="center", fontsize=8,
                        color="white" if v > cm.max() / 2 else "black")
        ax.set_xlabel("predicted")
        ax.set_ylabel("truth")
        ax.set_title(f"{dl} / {eng}", fontsize=9)
    return save(fig, out, tight=True)


def judgment_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod = "geometric"
) -> Section:
    """The judgment section: accuracy/MAE, invariance across styles, gaps, confusion matrices."""
    d = judgment_data(ds, method=method)
    matrices = confusions(d)
    env = str(ds.attrs.get("env_name", "judgment"))
    parts = [
        ("Accuracy and MAE at the last turn", format_accuracy(accuracy_table(d))),
        ("Invariance across styles (active, per case; mean ± SEM over cases)",
         format_invariance(invariance(d))),
        ("Passive minus active (per case; mean ± SEM over cases)", format_gaps(gaps(d))),
        ("Confusion matrices at the last turn", format_confusions(matrices)),
    ]
    tri = format_triage(triage(d))
    if tri:
        parts.append(("Style posterior and style-conditioned urgency", tri))
    failures = format_failures(simulator_failures(ds))
    if failures:
        parts.append(("Simulator", failures))
    text = "\n\n".join(f"-- {title} --\n{body}" for title, body in parts)
    md = (f"Label probe `{d.attrs['probe']}` ({', '.join(d.attrs['labels'])}) at each "
          "episode's last turn against the case's ground truth. No closed-form oracle: the "
          "belief should not depend on the communication style (invariance), and should "
          "match the label.\n\n")
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        name = f"{env}.png"
        files = (plot(d, matrices, out_dir / name),)
        md += f"![{env}]({name})\n\n"
    md += "".join(f"### {title}\n\n```\n{body}\n```\n\n" for title, body in parts)
    return Section(title=f"{env}: invariance and accuracy", text=text, markdown=md, files=files)
