"""The ``social-judgment`` / ``medical-triage`` analysis section: no oracle, so invariance,
accuracy and passive-vs-active gaps.

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

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, OUTCOME, TURN
from belieflens.envs.judgment.metrics import (
    accuracy,
    at_argmax,
    confusion,
    expected_level,
    level_abs_error,
    passive_active_gap,
    scalar_spread,
    style_spread,
)
from belieflens.errors import CacheFileError
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

LABEL_PROBES: tuple[str, ...] = ("verdict", "urgency")
"""The label probe of each judgment task."""

STYLE_DIM = "style"
CASE_DIM = "case"
CLEAN = "clean"


@dataclass(frozen=True)
class JudgmentData:
    """Final-turn label beliefs and what each episode is.

    Attributes:
        probe: the label probe's name.
        labels: its outcome labels.
        belief: label belief per (delivery, episode, turn, outcome).
        final: label belief at each episode's last turn, per (delivery, episode, outcome).
        truth: true label index per episode.
        case, style, engagement: per episode.
        style_final: for triage, the style belief at the last turn (else ``None``).
        conditioned_final: for triage, the urgency at the model's most likely style.
        style_labels: the style probe's labels (triage), else empty.
        simulated: per episode, False for an active episode with a failed simulation.
    """

    probe: str
    labels: tuple[str, ...]
    belief: xr.DataArray
    final: xr.DataArray
    truth: xr.DataArray
    case: xr.DataArray
    style: xr.DataArray
    engagement: xr.DataArray
    style_final: xr.DataArray | None = None
    conditioned_final: xr.DataArray | None = None
    style_labels: tuple[str, ...] = ()
    simulated: xr.DataArray | None = None

    def episodes(self, mask: np.ndarray) -> JudgmentData:
        """The same data restricted to the episodes where ``mask`` is true."""
        def sel(x: xr.DataArray | None) -> xr.DataArray | None:
            return None if x is None else x.isel({EPISODE: mask})

        return replace(
            self, belief=self.belief.isel({EPISODE: mask}), final=self.final.isel({EPISODE: mask}),
            truth=self.truth.isel({EPISODE: mask}), case=self.case.isel({EPISODE: mask}),
            style=self.style.isel({EPISODE: mask}),
            engagement=self.engagement.isel({EPISODE: mask}), style_final=sel(self.style_final),
            conditioned_final=sel(self.conditioned_final), simulated=sel(self.simulated),
        )


def _probe(b: xr.Dataset, name: str, var: str = "belief") -> xr.DataArray:
    k = int((b["outcome_label"].sel(probe=name) != "").sum())
    return b[var].sel(probe=name, drop=True).isel({OUTCOME: slice(0, k)})


def last_turn(p: xr.DataArray) -> xr.DataArray:
    """``p`` at the last turn where it has values (per every other coordinate)."""
    valid = p.notnull().all(OUTCOME)
    rank = xr.DataArray(np.arange(1, p.sizes[TURN] + 1), dims=[TURN])
    return p.isel({TURN: (valid * rank).argmax(TURN)})


def judgment_data(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> JudgmentData:
    """Read the label beliefs and episode truth a judgment section needs from a cache file."""
    b = output_beliefs(ds, method=method)
    probes = [str(p) for p in b["probe"].values]
    found = [p for p in LABEL_PROBES if p in probes]
    if not found:
        raise CacheFileError("judgment cache file lacks a 'verdict' or 'urgency' probe")
    for key in ("label_index", "case", "style", "engagement"):
        if not has_truth(ds, key):
            raise CacheFileError(f"judgment cache file lacks episode truth {key!r}")
    probe = found[0]
    labels = tuple(str(x) for x in b["outcome_label"].sel(probe=probe).values if str(x))
    belief = _probe(b, probe).transpose("delivery", EPISODE, TURN, OUTCOME)
    style_final = conditioned = None
    style_labels: tuple[str, ...] = ()
    if "style" in probes:
        p_style = _probe(b, "style").transpose("delivery", EPISODE, TURN, OUTCOME)
        style_labels = tuple(str(x) for x in b["outcome_label"].sel(probe="style").values
                             if str(x))
        cond_names = [f"{probe}|style={s}" for s in style_labels]
        style_final = last_turn(p_style)
        if all(n in probes for n in cond_names):
            given = xr.concat([_probe(b, n) for n in cond_names], dim=STYLE_DIM)
            cond = at_argmax(given, p_style.rename({OUTCOME: STYLE_DIM}), condition_dim=STYLE_DIM)
            conditioned = last_turn(cond.transpose("delivery", EPISODE, TURN, OUTCOME))
    return JudgmentData(
        probe=probe,
        labels=labels,
        belief=belief,
        final=last_turn(belief),
        truth=episode_truth(ds, "label_index"),
        case=episode_truth(ds, "case"),
        style=episode_truth(ds, "style"),
        engagement=episode_truth(ds, "engagement"),
        style_final=style_final,
        conditioned_final=conditioned,
        style_labels=style_labels,
        simulated=(episode_truth(ds, "sim_failures").fillna(0.0) == 0)
        if has_truth(ds, "sim_failures") else None,
    )


def by_case(x: xr.DataArray, case: xr.DataArray, style: xr.DataArray,
            styles: list[str]) -> xr.DataArray:
    """``x`` (with an ``episode`` dim) regrouped on ``(case, style)``, averaging repeats."""
    cases = sorted({str(c) for c in case.values})
    parts = []
    for c in cases:
        row = []
        for s in styles:
            mask = (case == c) & (style == s)
            sel = x.sel({EPISODE: x[EPISODE][mask.values]})
            row.append(sel.mean(EPISODE, skipna=True) if sel.sizes[EPISODE] else
                       xr.full_like(x.isel({EPISODE: 0}, drop=True), np.nan))
        parts.append(xr.concat(row, dim=STYLE_DIM))
    out = xr.concat(parts, dim=CASE_DIM)
    return out.assign_coords({CASE_DIM: cases, STYLE_DIM: styles})


def _styles(d: JudgmentData, engagement: str) -> list[str]:
    seen: list[str] = []
    for s, e in zip(d.style.values, d.engagement.values, strict=True):
        if str(e) == engagement and str(s) not in seen:
            seen.append(str(s))
    return seen


def _pm(m: xr.Dataset, fmt: str = ".3f") -> str:
    mean, sem = float(m["mean"]), float(m["sem"])
    if not np.isfinite(mean):
        return "-"
    return f"{mean:{fmt}}±{sem:{fmt}}" if np.isfinite(sem) else f"{mean:{fmt}}"


@dataclass(frozen=True)
class JudgmentTables:
    """The section's results as text blocks and the arrays its plots need."""

    accuracy: str
    invariance: str
    gaps: str
    confusion: str
    triage: str
    failures: str
    turn_accuracy: xr.DataArray
    matrices: dict[tuple[str, str], xr.DataArray]


def _invariance(d: JudgmentData, deliveries: list[str]) -> str:
    active = _styles(d, "active")
    if len(active) < 2:
        return ("needs active episodes in at least 2 styles "
                f"(found {len(active)}): run with engagement=active or both")
    p = by_case(d.final, d.case, d.style, active)
    enough = p.notnull().all(OUTCOME).sum(STYLE_DIM) >= 2  # a case needs two styles
    spread = style_spread(p, style_dim=STYLE_DIM, dim=OUTCOME).where(enough)
    level = scalar_spread(expected_level(p, OUTCOME), style_dim=STYLE_DIM).where(enough)
    lines = [f"{'delivery':<16} {'style TVD spread':>18} {'E[level] range':>16} {'cases':>6}"]
    for dl in deliveries:
        s_ = mean_sem(spread.sel(delivery=dl), CASE_DIM)
        l_ = mean_sem(level.sel(delivery=dl), CASE_DIM)
        lines.append(f"{dl:<16} {_pm(s_):>18} {_pm(l_):>16} {int(s_['n']):>6}")
    lines.append("per case (style TVD spread, by delivery): " + "; ".join(
        f"{c}: " + ", ".join(f"{float(spread.sel(delivery=dl, case=c)):.3f}"
                             for dl in deliveries)
        for c in spread[CASE_DIM].values))
    return "\n".join(lines)


def _gaps(d: JudgmentData, deliveries: list[str]) -> str:
    passive, active = _styles(d, "passive"), _styles(d, "active")
    if not (passive and active):
        return "needs both passive and active episodes: run with engagement=both"
    acc = accuracy(d.final, d.truth)
    err = level_abs_error(d.final, d.truth)
    lines = [f"{'delivery':<16} {'accuracy gap':>14} {'abs-err gap':>14} {'cases':>6}"]
    pa = by_case(acc, d.case, d.style, passive).isel({STYLE_DIM: 0}, drop=True)
    aa = by_case(acc, d.case, d.style, active)
    pe = by_case(err, d.case, d.style, passive).isel({STYLE_DIM: 0}, drop=True)
    ae = by_case(err, d.case, d.style, active)
    ga = passive_active_gap(pa, aa, style_dim=STYLE_DIM)
    ge = passive_active_gap(pe, ae, style_dim=STYLE_DIM)
    for dl in deliveries:
        a = mean_sem(ga.sel(delivery=dl), CASE_DIM)
        e = mean_sem(ge.sel(delivery=dl), CASE_DIM)
        lines.append(f"{dl:<16} {_pm(a):>14} {_pm(e):>14} {int(a['n']):>6}")
    per_style = passive_active_gap(pa, aa, style_dim=None).mean(CASE_DIM, skipna=True)
    lines.append("accuracy gap by style (mean over cases): " + "; ".join(
        f"{dl}: " + ", ".join(f"{s} {float(per_style.sel(delivery=dl, style=s)):+.3f}"
                              for s in active)
        for dl in deliveries))
    return "\n".join(lines)


def judgment_tables(d: JudgmentData) -> JudgmentTables:
    """Compute every table of the section (see the module docstring)."""
    acc = accuracy(d.final, d.truth)
    err = level_abs_error(d.final, d.truth)
    deliveries = [str(x) for x in d.final["delivery"].values]
    styles_all = _styles(d, "passive") + _styles(d, "active")

    lines = [f"{'delivery':<16} {'style':<15} {'accuracy':>14} {'MAE':>14} {'n':>4}"]
    for dl in deliveries:
        for s in styles_all:
            mask = (d.style == s).values
            a = mean_sem(acc.sel(delivery=dl).isel({EPISODE: mask}), EPISODE)
            e = mean_sem(err.sel(delivery=dl).isel({EPISODE: mask}), EPISODE)
            lines.append(f"{dl:<16} {s:<15} {_pm(a):>14} {_pm(e):>14} {int(a['n']):>4}")
    acc_text = "\n".join(lines)

    left_out = ""
    u = d
    if d.simulated is not None and not bool(d.simulated.all()):
        n_out = int((~d.simulated).sum())
        left_out = (f"\n(left out: {n_out} active episode(s) whose simulator failed on some "
                    "segment, so it was delivered clean)")
        u = d.episodes(np.asarray(d.simulated.values, dtype=bool))
    inv_text = _invariance(u, deliveries) + left_out
    gap_text = _gaps(u, deliveries) + left_out

    matrices: dict[tuple[str, str], xr.DataArray] = {}
    blocks = []
    for dl in deliveries:
        for eng in ("passive", "active"):
            mask = (d.engagement == eng).values
            if not mask.any():
                continue
            m = confusion(d.final.sel(delivery=dl).isel({EPISODE: mask}),
                          d.truth.isel({EPISODE: mask}), d.labels, OUTCOME)
            matrices[(dl, eng)] = m
            width = max(len(x) for x in d.labels) + 2
            rows = [f"{dl} / {eng} (rows: truth, columns: predicted)",
                    " " * width + "".join(f"{x:>{width}}" for x in d.labels)]
            for i, lab in enumerate(d.labels):
                rows.append(f"{lab:<{width}}" + "".join(
                    f"{int(v):>{width}}" for v in m.values[i]))
            blocks.append("\n".join(rows))
    conf_text = "\n\n".join(blocks)

    triage_text = ""
    if d.style_final is not None:
        lines = [f"{'delivery':<16} {'style acc':>12} {'urg acc|style':>14} "
                 f"{'urg MAE|style':>14} {'n':>4}"]
        amask = (d.engagement == "active").values
        true_style = xr.DataArray(
            [float(d.style_labels.index(str(s))) if str(s) in d.style_labels else np.nan
             for s in d.style.values], dims=[EPISODE], coords={EPISODE: d.style[EPISODE]})
        s_acc = accuracy(d.style_final, true_style)
        for dl in deliveries:
            sa = mean_sem(s_acc.sel(delivery=dl).isel({EPISODE: amask}), EPISODE)
            if d.conditioned_final is not None:
                ca = mean_sem(accuracy(d.conditioned_final, d.truth).sel(delivery=dl), EPISODE)
                ce = mean_sem(level_abs_error(d.conditioned_final, d.truth).sel(delivery=dl),
                              EPISODE)
                cond_cells = f"{_pm(ca):>14} {_pm(ce):>14} {int(ca['n']):>4}"
            else:
                cond_cells = f"{'-':>14} {'-':>14} {'-':>4}"
            lines.append(f"{dl:<16} {_pm(sa):>12} {cond_cells}")
        lines.append("style acc: the model's most likely style is the simulator's (active "
                     "episodes); urg …|style: urgency asked with that style written into the "
                     "prompt (all episodes)")
        triage_text = "\n".join(lines)

    return JudgmentTables(
        accuracy=acc_text, invariance=inv_text, gaps=gap_text, confusion=conf_text,
        triage=triage_text, failures="",
        turn_accuracy=accuracy(d.belief, d.truth), matrices=matrices,
    )


def _failures(ds: xr.Dataset) -> str:
    if not has_truth(ds, "sim_failures"):
        return ""
    fails = episode_truth(ds, "sim_failures")
    attempts = episode_truth(ds, "sim_attempts") if has_truth(ds, "sim_attempts") else None
    n_active = int(fails.notnull().sum())
    total = int(np.nansum(fails.values))
    text = (f"simulator: {total} segment(s) failed every attempt (delivered clean) in "
            f"{n_active} active episode(s)")
    if attempts is not None:
        text += f"; {int(np.nansum(attempts.values))} simulator calls"
    return text


def plot(d: JudgmentData, t: JudgmentTables, out: Path) -> Path:
    """Accuracy per turn (per delivery and engagement) and the confusion matrices."""
    plt = pyplot()
    n_conf = len(t.matrices)
    fig, axes = plt.subplots(1, 1 + n_conf, figsize=(5 + 3.6 * n_conf, 3.8), squeeze=False)
    ax = axes[0][0]
    for dl in t.turn_accuracy["delivery"].values:
        for eng in ("passive", "active"):
            mask = (d.engagement == eng).values
            if not mask.any():
                continue
            sub = t.turn_accuracy.sel(delivery=dl).isel({EPISODE: mask})
            ms = mean_sem(sub, EPISODE)
            turns = sub[TURN].values
            m = ms["mean"].values
            s = np.nan_to_num(ms["sem"].values)
            ax.plot(turns, m, marker="o", label=f"{dl} / {eng}")
            ax.fill_between(turns, m - s, m + s, alpha=0.15)
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("turn (segments told)")
    ax.set_ylabel(f"accuracy of the {d.probe}")
    ax.set_title("accuracy per turn (mean ± 1 SEM)")
    ax.legend(fontsize=7)
    for ax, ((dl, eng), cm) in zip(axes[0][1:], t.matrices.items(), strict=True):
        ax.imshow(cm.values, cmap="Blues")
        ax.set_xticks(range(len(d.labels)), d.labels, rotation=45, fontsize=7)
        ax.set_yticks(range(len(d.labels)), d.labels, fontsize=7)
        for i in range(len(d.labels)):
            for j in range(len(d.labels)):
                v = int(cm.values[i, j])
                ax.text(j, i, str(v), ha="center", va="center", fontsize=8,
                        color="white" if v > cm.values.max() / 2 else "black")
        ax.set_xlabel("predicted")
        ax.set_ylabel("truth")
        ax.set_title(f"{dl} / {eng}", fontsize=9)
    return save(fig, out, tight=True)


def judgment_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod = "geometric"
) -> Section:
    """The judgment section: accuracy/MAE, invariance across styles, gaps, confusion matrices."""
    d = judgment_data(ds, method=method)
    t = judgment_tables(d)
    env = str(ds.attrs.get("env_name", "judgment"))
    parts = [
        ("Accuracy and MAE at the last turn", t.accuracy),
        ("Invariance across styles (active, per case; mean ± SEM over cases)", t.invariance),
        ("Passive minus active (per case; mean ± SEM over cases)", t.gaps),
        ("Confusion matrices at the last turn", t.confusion),
    ]
    if t.triage:
        parts.append(("Style posterior and style-conditioned urgency", t.triage))
    failures = _failures(ds)
    if failures:
        parts.append(("Simulator", failures))
    text = "\n\n".join(f"-- {title} --\n{body}" for title, body in parts)
    md = (f"Label probe `{d.probe}` ({', '.join(d.labels)}) at each episode's last turn "
          "against the case's ground truth. No closed-form oracle: the belief should not "
          "depend on the communication style (invariance), and should match the label.\n\n")
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        name = f"{env}.png"
        files = (plot(d, t, out_dir / name),)
        md += f"![{env}]({name})\n\n"
    md += "".join(f"### {title}\n\n```\n{body}\n```\n\n" for title, body in parts)
    return Section(title=f"{env}: invariance and accuracy", text=text, markdown=md, files=files)

