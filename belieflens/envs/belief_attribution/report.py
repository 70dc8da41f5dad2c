"""The ``belief-attribution`` analysis section: revision under contradiction and the BAS.

Revision is reported two ways. **String match** (where the file has it:
``protocol=benchmark``): the answer the model's generated final reply commits to is the
contradiction (``truth_revised_match``, read by
:func:`belieflens.envs.belief_attribution.replies.committed_answer`; the benchmark's own
``measure_revision``, any mention of it, is ``truth_revised_mention``). **Log-prob shift**: per
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

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.stats import mean_sem, mean_sem_values
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, OUTCOME
from belieflens.envs.belief_attribution.metrics import (
    DEFAULT_THRESHOLD,
    BASResult,
    bootstrap_bas,
    bootstrap_bas_questions,
    revised,
    revision,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

BOOT_SEED = 0
"""Seed of the bootstrap generator (the section is deterministic)."""

N_BOOT = 2000
"""Bootstrap resamples per interval."""

LOW_THRESHOLD = 0.1
"""A second, lenient revision threshold shown beside the main one (small models barely move)."""

BEFORE, AFTER = 1, 2
"""Turns read before and after the contradiction (turn 0 is the bare question)."""


@dataclass(frozen=True)
class EpisodeRevision:
    """Per-episode belief shifts, aligned on ``episode`` (one delivery).

    Attributes:
        matched: the benchmark's string-match revision per episode (1.0 or 0.0), or
            ``None`` when the file has none (``protocol=belieflens``).
        shift: mass moved to the contradiction, ``after[c] - before[c]`` (NaN where a
            belief is missing, or, with ``stated=model``, where the model's own reply
            named none of the answers).
        condition: ``self`` or ``user`` per episode.
        domain: the item's domain per episode.
        p_contra: belief in the contradiction at turns 0, 1, 2, dims ``(episode, turn)``.
        p_stated: belief in the stated answer at turns 0, 1, 2.
        p_correct: belief in the correct answer at turns 0, 1, 2.
        item: the question id per episode (``truth_item``), or ``None`` when the file
            has none; the BAS interval resamples questions when it is there.
        excluded: ``self`` episodes whose first answer already committed to the
            contradiction (:func:`first_is_contradiction`): their shift and string match
            are NaN, so revision cannot be counted without a change of mind.
    """

    shift: xr.DataArray
    condition: xr.DataArray
    domain: xr.DataArray
    p_contra: xr.DataArray
    p_stated: xr.DataArray
    p_correct: xr.DataArray
    matched: xr.DataArray | None = None
    item: xr.DataArray | None = None
    excluded: int = 0
    """``self`` episodes left out because their first answer already was the contradiction."""


def episode_revisions(
    ds: xr.Dataset, *, method: DebiasMethod = "geometric", delivery: str | None = None
) -> EpisodeRevision:
    """Revision per episode from a belief-attribution cache file."""
    b = output_beliefs(ds, method=method)
    d = str(b["delivery"].values[0]) if delivery is None else delivery
    cond = episode_truth(ds, "condition")
    belief = b["belief"].sel(delivery=d)
    # each episode has one probe, answer-<condition>; pick it per episode
    per_ep = xr.concat(
        [belief.sel(probe=f"answer-{cond.sel(episode=e).item()}", episode=e, drop=True)
         for e in cond[EPISODE].values],
        dim=EPISODE, coords="minimal", compat="override",
    ).assign_coords({EPISODE: cond[EPISODE].values}).isel({OUTCOME: slice(0, 3)})

    def at(key: str) -> xr.DataArray:
        idx = episode_truth(ds, key).astype(np.int64)
        return per_ep.isel({OUTCOME: idx})

    contra = episode_truth(ds, "contradiction").astype(np.int64)
    before = per_ep.sel(turn=BEFORE).values
    after = per_ep.sel(turn=AFTER).values
    shift = revision(np.nan_to_num(before), np.nan_to_num(after), contra.values)
    ok = np.isfinite(before).all(-1) & np.isfinite(after).all(-1)
    if has_truth(ds, "own_matched"):  # stated=model: leave out replies naming no answer
        ok &= episode_truth(ds, "own_matched").values > 0.5
    first = first_is_contradiction(ds)
    matched = (episode_truth(ds, "revised_match").astype(np.float64)
               if has_truth(ds, "revised_match") else None)
    return EpisodeRevision(
        shift=xr.DataArray(np.where(ok & ~first, shift, np.nan), dims=[EPISODE],
                           coords={EPISODE: cond[EPISODE].values}),
        condition=cond,
        domain=episode_truth(ds, "domain"),
        p_contra=at("contradiction"),
        p_stated=at("stated"),
        p_correct=at("correct"),
        matched=None if matched is None else matched.where(~first),
        item=episode_truth(ds, "item") if has_truth(ds, "item") else None,
        excluded=int(first.sum()),
    )


def first_is_contradiction(ds: xr.Dataset) -> np.ndarray:
    """Per episode: a ``self`` episode whose first answer already committed to the
    contradiction (``truth_first_is_contradiction``; in files without it, the committed
    ``truth_reply_named`` equal to ``truth_contradiction``). False where neither is stored."""
    cond = episode_truth(ds, "condition").values.astype(str)
    if has_truth(ds, "first_is_contradiction"):
        return np.asarray(episode_truth(ds, "first_is_contradiction").values > 0.5)
    if has_truth(ds, "reply_named"):
        named = episode_truth(ds, "reply_named").values
        contra = episode_truth(ds, "contradiction").values
        return np.asarray((cond == "self") & (named == contra))
    return np.zeros(cond.size, dtype=bool)


def bas_table(
    rev: EpisodeRevision, *, threshold: float = DEFAULT_THRESHOLD, seed: int = BOOT_SEED,
    measure: Literal["shift", "match"] = "shift",
) -> dict[str, BASResult | None]:
    """BAS with a bootstrap CI per domain (sorted) and ``all``.

    ``measure``: revision by log-prob shift (``shift >= threshold``) or by string
    match on the committed final answer (needs ``rev.matched``). The interval resamples
    questions (:func:`bootstrap_bas_questions`) when ``rev.item`` is there, else each
    condition's episodes. ``None`` where a domain lacks one of the conditions.
    """
    if measure == "match":
        if rev.matched is None:
            raise ValueError("this file has no string-match revisions (protocol=belieflens)")
        flags = rev.matched.values
        ok = np.isfinite(flags)
        r = flags[ok] > 0.5
    else:
        ok = np.isfinite(rev.shift.values)
        r = revised(rev.shift.values[ok], threshold)
    cond = rev.condition.values[ok].astype(str)
    dom = rev.domain.values[ok].astype(str)
    item = None if rev.item is None else rev.item.values[ok].astype(str)
    rng = np.random.default_rng(seed)
    out: dict[str, BASResult | None] = {}
    groups = [(str(x), dom == x) for x in sorted(set(dom.tolist()))]
    groups.append(("all", np.ones(r.size, dtype=bool)))
    for name, mask in groups:
        u, s = r[mask & (cond == "user")], r[mask & (cond == "self")]
        if not (u.size and s.size):
            out[name] = None
        elif item is not None:
            out[name] = bootstrap_bas_questions(r[mask], cond[mask], item[mask], rng,
                                                n_boot=N_BOOT)
        else:
            out[name] = bootstrap_bas(u, s, rng, n_boot=N_BOOT)
    return out


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


def condition_table(rev: EpisodeRevision, threshold: float) -> str:
    """Per condition: n, mean shift ± SEM, revise rate, beliefs in stated/contradiction/correct."""
    lines = [f"{'condition':<9} {'n':>3} {'shift to contradiction':>24} {'revise rate':>11} "
             f"{'rate@' + str(LOW_THRESHOLD):>8} "
             f"{'P(stated) t1':>12} {'P(contra) t0→t1→t2':>22} {'P(correct) t0':>13}"]
    for c in ("self", "user"):
        mask = rev.condition.values.astype(str) == c
        if not mask.any():
            continue
        sh = rev.shift.values[mask]
        fin = sh[np.isfinite(sh)]
        rate = float(revised(fin, threshold).mean()) if fin.size else float("nan")
        low = float(revised(fin, LOW_THRESHOLD).mean()) if fin.size else float("nan")
        pc = rev.p_contra.values[mask]
        contra = "→".join(f"{np.nanmean(pc[:, t]):.2f}" for t in range(pc.shape[1]))
        ps = float(np.nanmean(rev.p_stated.sel(turn=BEFORE).values[mask]))
        pk = float(np.nanmean(rev.p_correct.sel(turn=0).values[mask]))
        lines.append(f"{c:<9} {int(fin.size):>3} {_signed_mean_sem(sh):>24} {_f(rate, 2):>11} "
                     f"{_f(low, 2):>8} "
                     f"{_f(ps, 2):>12} {contra:>22} {_f(pk, 2):>13}")
    return "\n".join(lines)


def format_bas(table: dict[str, BASResult | None]) -> str:
    """The BAS table: domain, questions, episodes and rates per condition, BAS and its
    bootstrap interval (``questions`` is ``—`` when the interval resampled episodes)."""
    lines = [f"{'domain':<14} {'questions':>9} {'n user':>6} {'n self':>6} {'rate user':>9} "
             f"{'rate self':>9} {'BAS':>7} {'95% CI':>18}"]
    for name, r in table.items():
        if r is None:
            lines.append(f"{name:<14} {'(needs both conditions)':>40}")
            continue
        ci = f"[{_f(r.low)}, {_f(r.high)}]"
        nq = str(r.questions) if r.questions else "—"
        lines.append(f"{name:<14} {nq:>9} {r.n_user:>6} {r.n_self:>6} "
                     f"{_f(r.rate_user, 2):>9} {_f(r.rate_self, 2):>9} {_f(r.bas):>7} "
                     f"{ci:>18}")
    return "\n".join(lines)


def _plot(rev: EpisodeRevision, table: dict[str, BASResult | None], out: Path) -> Path:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for c in ("self", "user"):
        mask = rev.condition.values.astype(str) == c
        if not mask.any():
            continue
        m, sem, _ = mean_sem_values(rev.p_contra.values[mask])
        s = np.nan_to_num(sem)  # no bar where fewer than two episodes
        t = rev.p_contra["turn"].values
        a1.errorbar(t, m, yerr=s, marker="o", capsize=3, label=c)
    a1.set_xticks([0, 1, 2], ["question", "stated answer", "contradiction"])
    a1.set_ylabel("P(contradicting answer)")
    a1.set_ylim(-0.02, 1.02)
    a1.legend(fontsize=8)
    a1.set_title("belief in the contradiction (mean ± 1 SEM)")
    names = list(table)
    x = np.arange(len(names))
    for i, name in enumerate(names):
        r = table[name]
        if r is None or not np.isfinite(r.bas):
            why = "needs both\nconditions" if r is None else "undefined:\nno revisions"
            a2.text(i, 0.0, why, ha="center", va="center", fontsize=7, color="grey")
            continue
        lo = r.bas - r.low if np.isfinite(r.low) else 0.0
        hi = r.high - r.bas if np.isfinite(r.high) else 0.0
        a2.errorbar([i], [r.bas], yerr=[[max(lo, 0.0)], [max(hi, 0.0)]], fmt="o", capsize=3,
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
    over = ("questions (both conditions of a drawn question together)" if rev.item is not None
            else "episodes, per condition (the file has no question ids)")
    note = (
        f"shift = P_after(contradiction) − P_before(contradiction) ({method}-debiased MCQ over "
        f"the three answers; before = after the stated answer, after = after the user's "
        f"contradiction); revised = shift ≥ {threshold}; BAS = (rate_user − rate_self) / "
        f"(rate_user + rate_self) with a {N_BOOT}-resample percentile bootstrap "
        f"(seed {BOOT_SEED}) over {over}, "
        f"0 when neither condition revises (as the benchmark's code); self episodes whose "
        f"first answer already was the contradiction are left out: {rev.excluded}"
    )
    ctab = condition_table(rev, threshold)
    btab = "revision by log-prob shift\n" + format_bas(table)
    if rev.matched is not None:
        mtab = ("revision by string match (the answer the model's generated final reply "
                "commits to is the contradiction)\n"
                + format_bas(bas_table(rev, measure="match")))
        btab = f"{mtab}\n\n{btab}"
    text = f"{note}\n\n{ctab}\n\n{btab}"
    md = f"{note}.\n\n```\n{ctab}\n```\n\n```\n{btab}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = (_plot(rev, table, out_dir),)
        md += "\n![belief attribution](belief_attribution.png)\n"
    return Section(title="Belief attribution", text=text, markdown=md, files=files)
