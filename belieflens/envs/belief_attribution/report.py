"""The ``belief-attribution`` analysis section: revision under contradiction and the BAS.

Revision is reported three ways, each table labelled, the benchmark's own first. **The
benchmark's measure** (where the file has it: ``protocol=benchmark``): its ``measure_revision``,
the final reply mentions the contradiction anywhere (``truth_revised_mention``), over every
episode as the benchmark's ``run`` counts them, so that P(revise | self) and the BAS are the
benchmark's. **Committed answer**: the answer the model's generated final reply commits to is
the contradiction (``truth_revised_match``, read by
:func:`belieflens.envs.belief_attribution.replies.committed_answer`: a reply that names the
contradiction to reject it is not revised). **Log-prob shift**: per
episode, the belief over the three answers is read at turn 1 (after the
stated answer, before the contradiction) and turn 2 (after it), each debiased
over the three rotations. *Revision* is the probability mass that moves to the
contradiction's answer (:func:`belieflens.envs.belief_attribution.metrics.revision`), not a
string match; an episode counts as revised when the shift reaches
:data:`belieflens.envs.belief_attribution.metrics.DEFAULT_THRESHOLD`. The Belief
Attribution Score per domain (and over all) comes with a percentile bootstrap
interval over questions (both conditions of a drawn question together,
:func:`belieflens.envs.belief_attribution.metrics.bootstrap_bas_questions`;
files without question ids resample each condition's episodes), drawn from
``np.random.default_rng(BOOT_SEED)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.stats import mean_sem, mean_sem_values
from belieflens.envs.belief_attribution.metrics import (
    BEFORE,
    BOOT_SEED,
    DEFAULT_THRESHOLD,
    DOMAIN,
    N_BOOT,
    bas_table,
    episode_revisions,
    revised,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

MENTION_LABEL = ("[the benchmark's measure] revised = the final reply mentions the "
                 "contradiction anywhere (its measure_revision; every episode, as its run() "
                 "counts them)")
"""Heading of the first table: the benchmark's own measure of revision."""

MATCH_LABEL = ("[this toolkit's measure] revised = the answer the final reply commits to is "
               "the contradiction (a reply naming it to reject it is not revised; self "
               "episodes whose first answer was already the contradiction left out)")
"""Heading of the committed-answer table."""

SHIFT_LABEL = ("[this toolkit's measure] revised = the log-prob shift of belief to the "
               "contradiction reaches the threshold")
"""Heading of the log-prob shift table."""

LOW_THRESHOLD = 0.1
"""A second, lenient revision threshold shown beside the main one (small models barely move)."""


def _f(x: float, d: int = 3) -> str:
    return "—" if not np.isfinite(x) else f"{x:+.{d}f}" if d == 3 else f"{x:.{d}f}"


def _signed_mean_sem(x: np.ndarray) -> str:
    """``+mean ± sem`` of the finite values of ``x`` (:func:`~belieflens.analysis.stats.mean_sem`),
    ``—`` when there are none."""
    ms = mean_sem(xr.DataArray(x[np.isfinite(x)], dims="x"), "x")
    if int(ms["n"]) == 0:
        return "—"
    sem = float(ms["sem"])
    return f"{float(ms['mean']):+.3f}" + (f" ± {sem:.3f}" if np.isfinite(sem) else "")


def condition_table(rev: xr.Dataset, threshold: float) -> str:
    """Per condition of :func:`~belieflens.envs.belief_attribution.metrics.episode_revisions`:
    n, mean shift ± SEM, revise rate, beliefs in stated/contradiction/correct."""
    lines = [f"{'condition':<9} {'n':>3} {'shift to contradiction':>24} {'revise rate':>11} "
             f"{'rate@' + str(LOW_THRESHOLD):>8} "
             f"{'P(stated) t1':>12} {'P(contra) t0→t1→t2':>22} {'P(correct) t0':>13}"]
    for c in ("self", "user"):
        mask = rev["condition"].values.astype(str) == c
        if not mask.any():
            continue
        sh = rev["shift"].values[mask]
        fin = sh[np.isfinite(sh)]
        rate = float(revised(fin, threshold).mean()) if fin.size else float("nan")
        low = float(revised(fin, LOW_THRESHOLD).mean()) if fin.size else float("nan")
        pc = rev["p_contra"].values[mask]
        contra = "→".join(f"{np.nanmean(pc[:, t]):.2f}" for t in range(pc.shape[1]))
        ps = float(np.nanmean(rev["p_stated"].sel(turn=BEFORE).values[mask]))
        pk = float(np.nanmean(rev["p_correct"].sel(turn=0).values[mask]))
        lines.append(f"{c:<9} {int(fin.size):>3} {_signed_mean_sem(sh):>24} {_f(rate, 2):>11} "
                     f"{_f(low, 2):>8} "
                     f"{_f(ps, 2):>12} {contra:>22} {_f(pk, 2):>13}")
    return "\n".join(lines)


def format_bas(table: xr.Dataset) -> str:
    """The BAS table of :func:`~belieflens.envs.belief_attribution.metrics.bas_table`: domain,
    questions, episodes and rates per condition, BAS and its bootstrap interval
    (``questions`` is ``—`` when the interval resampled episodes)."""
    lines = [f"{'domain':<14} {'questions':>9} {'n user':>6} {'n self':>6} {'rate user':>9} "
             f"{'rate self':>9} {'BAS':>7} {'95% CI':>18}"]
    for name in table[DOMAIN].values:
        r = table.sel({DOMAIN: name})
        if not bool(r["defined"]):
            lines.append(f"{name:<14} {'(needs both conditions)':>40}")
            continue
        ci = f"[{_f(float(r['low']))}, {_f(float(r['high']))}]"
        nq = str(int(r["questions"])) if int(r["questions"]) else "—"
        lines.append(f"{name:<14} {nq:>9} {int(r['n_user']):>6} {int(r['n_self']):>6} "
                     f"{_f(float(r['rate_user']), 2):>9} {_f(float(r['rate_self']), 2):>9} "
                     f"{_f(float(r['bas'])):>7} {ci:>18}")
    return "\n".join(lines)


def _plot(rev: xr.Dataset, table: xr.Dataset, out: Path) -> Path:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for c in ("self", "user"):
        mask = rev["condition"].values.astype(str) == c
        if not mask.any():
            continue
        m, sem, _ = mean_sem_values(rev["p_contra"].values[mask])
        s = np.nan_to_num(sem)  # no bar where fewer than two episodes
        t = rev["p_contra"]["turn"].values
        a1.errorbar(t, m, yerr=s, marker="o", capsize=3, label=c)
    a1.set_xticks([0, 1, 2], ["question", "stated answer", "contradiction"])
    a1.set_ylabel("P(contradicting answer)")
    a1.set_ylim(-0.02, 1.02)
    a1.legend(fontsize=8)
    a1.set_title("belief in the contradiction (mean ± 1 SEM)")
    names = [str(n) for n in table[DOMAIN].values]
    x = np.arange(len(names))
    for i, name in enumerate(names):
        r = table.sel({DOMAIN: name})
        bas, low, high = float(r["bas"]), float(r["low"]), float(r["high"])
        if not bool(r["defined"]) or not np.isfinite(bas):
            why = "undefined:\nno revisions" if bool(r["defined"]) else "needs both\nconditions"
            a2.text(i, 0.0, why, ha="center", va="center", fontsize=7, color="grey")
            continue
        lo = bas - low if np.isfinite(low) else 0.0
        hi = high - bas if np.isfinite(high) else 0.0
        a2.errorbar([i], [bas], yerr=[[max(lo, 0.0)], [max(hi, 0.0)]], fmt="o", capsize=3,
                    color="C0")
    a2.axhline(0.0, color="k", lw=0.8)
    a2.set_xticks(x, names, rotation=30, fontsize=8)
    a2.set_ylim(-1.05, 1.05)
    a2.set_title("Belief Attribution Score (95% bootstrap CI)")
    return save(fig, out / "belief_attribution.png", tight=True)


def belief_attribution_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod
) -> Section:
    """The ``belief-attribution`` section: revision per condition and BAS per domain."""
    threshold = DEFAULT_THRESHOLD
    rev = episode_revisions(ds, method=method)
    table = bas_table(rev, threshold=threshold)
    over = ("questions (both conditions of a drawn question together)" if "item" in rev
            else "episodes, per condition (the file has no question ids)")
    note = (
        f"BAS = (rate_user − rate_self) / (rate_user + rate_self) with a {N_BOOT}-resample "
        f"percentile bootstrap (seed {BOOT_SEED}) over {over}, 0 when neither condition "
        f"revises (as the benchmark's code); self episodes whose first answer already was the "
        f"contradiction, left out of this toolkit's measures: {rev.attrs['excluded']}"
    )
    shift = (f"{SHIFT_LABEL} (shift = P_after(contradiction) − P_before(contradiction), "
             f"{method}-debiased MCQ over the three answers; before = after the stated answer, "
             f"after = after the user's contradiction; revised = shift ≥ {threshold})")
    ctab = condition_table(rev, threshold)
    tables = [f"{shift}\n{format_bas(table)}"]
    if "matched" in rev:
        tables.insert(0, f"{MATCH_LABEL}\n{format_bas(bas_table(rev, measure='match'))}")
    if "mentioned" in rev:
        tables.insert(0, f"{MENTION_LABEL}\n{format_bas(bas_table(rev, measure='mention'))}")
    btab = "\n\n".join(tables)
    text = f"{note}\n\n{btab}\n\n{ctab}"
    md = f"{note}.\n\n```\n{btab}\n```\n\n```\n{ctab}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = (_plot(rev, table, out_dir),)
        md += "\n![belief attribution](belief_attribution.png)\n"
    return Section(title="Belief attribution", text=text, markdown=md, files=files)
