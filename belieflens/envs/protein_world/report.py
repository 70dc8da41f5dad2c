"""The ``protein-world`` analysis section: posterior error, downstream gap and experiment choice.

Per step ``k`` (turn ``k`` = after ``k`` experiments), per delivery, mean ± SEM over episodes:

- ``KL(passive ‖ model)``: the exact posterior on the stated history (the
  ``class`` probe's oracle) against the model's debiased class belief (oracle first): the
  revealed read-out.
- where the file holds the stated posterior of App. F.3.2 (``truth_stated_k_c``), the same KL
  against it (``kl_stated``, the verbalised read-out) and the share of its replies that parsed
  (``stated_parsed``): an unparsed reply is counted there, and has no KL. A stated probability
  of exactly 0 is floored at 1e-12 in the KL (as every KL of the package): a 0 where the
  oracle holds mass ``p`` adds ``p · ln(p / 1e-12)`` (27.6 ``p`` nats); the share of parsed
  replies that give the true class zero mass (``stated_zero_truth``) and that give any class
  the oracle keeps zero mass (``stated_zero_support``) are shown beside it.
- the downstream gap of Fig. 4, ``p_active(θ*) − p_stated(θ*)``, as the paper takes it: the
  active (max-EIG) experimenter's posterior on the true class after ``k`` of its own
  experiments (``truth_p_active_true_k``) minus the model's *stated* posterior on it
  (``gap_stated``, over the replies that parsed), with the revealed one beside it
  (``gap_revealed``: minus the model's debiased class belief).
- where the model chose the experiments (``truth_choice_source_k``): how each choice was made
  (by EIG under its revealed belief, by the MCQ, or the seeded fallback), the MCQ's parsed
  rotations, and whether the experiment run is the max-EIG one under the exact posterior
  (``ran_best``).
- experiment choice (``next-experiment`` probe): the rate at which the model's
  most likely experiment is the max-EIG one (``truth_best_experiment_k``), the
  model's probability of that experiment and, where the file has the EIG of
  every experiment (``truth_eig_k_j``), the EIG regret of the model's pick,
  ``max_j EIG_j − EIG(argmax)``, in nats.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.divergence import kl
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, OUTCOME, TURN
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

CLASS = "class"
"""The class probe."""

NEXT = "next-experiment"
"""The next-experiment probe."""


def _per_turn(ds: xr.Dataset, key: str, turns: xr.DataArray) -> xr.DataArray:
    """Truth ``<key>_<turn>`` as ``(episode, turn)``; NaN / "" where a turn has no value."""
    cols = []
    for t in turns.values:
        name = f"{key}_{int(t)}"
        cols.append(episode_truth(ds, name) if has_truth(ds, name) else None)
    template = next((c for c in cols if c is not None), None)
    if template is None:
        raise KeyError(key)
    filled = [c if c is not None else xr.full_like(template, np.nan if template.dtype.kind == "f"
                                                   else "") for c in cols]
    return xr.concat(filled, dim=TURN).assign_coords({TURN: turns.values}).transpose(EPISODE, TURN)


def step_metrics(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Per (delivery, episode, turn): ``kl``, ``p_model_true``, ``p_passive_true``,
    ``p_active_true``, ``gap_revealed``; with a stated posterior, ``kl_stated``,
    ``p_stated_true``, ``gap_stated``, ``stated_parsed`` (1 / 0; NaN where a turn has no
    stated read-out), ``stated_zero_truth`` and ``stated_zero_support`` (1 / 0 over the parsed
    replies); and, at turns with a next-experiment probe, ``choice_match``, ``p_best``, (if
    stored) ``eig_regret`` and, where the file records the experiments run, ``ran_best``."""
    b = output_beliefs(ds, method=method)
    cls = b.sel(probe=CLASS)
    k = int((cls["outcome_label"] != "").sum())
    model = cls["belief"].isel({OUTCOME: slice(0, k)})
    oracle = cls["oracle"].isel({OUTCOME: slice(0, k)})
    theta = episode_truth(ds, "theta_index").astype(np.int64)
    p_model = model.isel({OUTCOME: theta})
    p_passive = oracle.isel({OUTCOME: theta})
    p_active = _per_turn(ds, "p_active_true", cls[TURN])
    out = xr.Dataset(
        {
            "kl": kl(oracle, model, OUTCOME),
            "p_model_true": p_model,
            "p_passive_true": p_passive,
            "p_active_true": p_active,
            "gap_revealed": p_active - p_model,
        }
    )
    if has_truth(ds, "stated_valid_0"):
        stated = stated_beliefs(ds, cls[TURN], k)
        out["kl_stated"] = kl(oracle, stated, OUTCOME)
        out["p_stated_true"] = stated.isel({OUTCOME: theta})
        out["stated_parsed"] = _per_turn(ds, "stated_valid", cls[TURN])
        parsed = stated.notnull().all(OUTCOME)
        out["stated_zero_truth"] = (out["p_stated_true"] == 0).astype(np.float64).where(parsed)
        out["stated_zero_support"] = ((stated == 0) & (oracle > 1e-12)).any(OUTCOME).astype(
            np.float64).where(parsed)
        out["gap_stated"] = p_active - out["p_stated_true"]
        for name in ("p_stated_true", "stated_parsed", "stated_zero_truth", "gap_stated"):
            out[name] = out[name].broadcast_like(out["kl"])  # one stated read-out per turn
    if NEXT in b["probe"].values:
        nxt = b.sel(probe=NEXT)
        j = int((nxt["outcome_label"] != "").sum())
        p = nxt["belief"].isel({OUTCOME: slice(0, j)})
        labels = np.asarray(nxt["outcome_label"].values[:j]).astype(str)
        best = _per_turn(ds, "best_experiment", cls[TURN])
        best_idx = xr.apply_ufunc(
            lambda s: np.vectorize(lambda x: float(np.flatnonzero(labels == x)[0])
                                   if x in labels else np.nan, otypes=[float])(s),
            best,
        )
        valid = p.notnull().all(OUTCOME)
        pick = p.fillna(-1.0).argmax(OUTCOME)
        has_best = best_idx.notnull()
        out["choice_match"] = (pick == best_idx).astype(np.float64).where(valid & has_best)
        out["p_best"] = p.isel({OUTCOME: best_idx.fillna(0).astype(np.int64)}).where(has_best)
        if has_truth(ds, "eig_0_0"):
            gains = xr.concat([_eig(ds, e, cls[TURN]) for e in range(j)], dim=OUTCOME)
            regret = gains.max(OUTCOME) - gains.isel({OUTCOME: pick})
            out["eig_regret"] = regret.where(valid & gains.notnull().all(OUTCOME))
        if has_truth(ds, "experiments"):
            out["ran_best"] = _ran_best(ds, best_idx)
    return out


def _ran_best(ds: xr.Dataset, best_idx: xr.DataArray) -> xr.DataArray:
    """1 where the experiment run after turn k (``truth_experiments``) is the max-EIG one
    under the exact posterior there, 0 where not, NaN after the last experiment."""
    runs = episode_truth(ds, "experiments").values.astype(str)
    turns = best_idx[TURN].values
    ran = np.full(best_idx.shape, np.nan)
    for e, text in enumerate(runs):
        seq = [int(x) for x in text.split(",") if x]
        for t_i, t in enumerate(turns):
            if int(t) < len(seq):
                ran[e, t_i] = float(seq[int(t)])
    run = xr.DataArray(ran, dims=best_idx.dims, coords=best_idx.coords)
    return (run == best_idx).astype(np.float64).where(run.notnull() & best_idx.notnull())


def stated_beliefs(ds: xr.Dataset, turns: xr.DataArray, k: int) -> xr.DataArray:
    """The stated posteriors ``truth_stated_<turn>_<class>`` as ``(episode, turn, outcome)``
    over the ``k`` classes (NaN where a reply did not parse or a turn has none)."""
    per_class = []
    for c in range(k):
        per_turn = []
        for t in turns.values:
            name = f"stated_{int(t)}_{c}"
            col = (episode_truth(ds, name) if has_truth(ds, name) else
                   xr.full_like(episode_truth(ds, "theta_index"), np.nan))
            per_turn.append(col.astype(np.float64))
        per_class.append(xr.concat(per_turn, dim=TURN).assign_coords({TURN: turns.values}))
    return xr.concat(per_class, dim=OUTCOME).transpose(EPISODE, TURN, OUTCOME)


def _eig(ds: xr.Dataset, experiment: int, turns: xr.DataArray) -> xr.DataArray:
    cols = []
    for t in turns.values:
        name = f"eig_{int(t)}_{experiment}"
        if has_truth(ds, name):
            cols.append(episode_truth(ds, name))
        else:
            cols.append(xr.full_like(episode_truth(ds, "theta_index"), np.nan))
    return xr.concat(cols, dim=TURN).assign_coords({TURN: turns.values}).transpose(EPISODE, TURN)


def step_summary(metrics: xr.Dataset) -> xr.Dataset:
    """Mean and SEM over episodes of every metric: variables ``<name>_mean``, ``<name>_sem``."""
    out = {}
    for name, x in metrics.data_vars.items():
        ms = mean_sem(x, EPISODE)
        out[f"{name}_mean"], out[f"{name}_sem"] = ms["mean"], ms["sem"]
    out["n"] = metrics["kl"].notnull().sum(EPISODE)
    return xr.Dataset(out)


def _fmt(m: float, s: float) -> str:
    if not np.isfinite(m):
        return "—"
    return f"{m:.3f}" + (f"±{s:.3f}" if np.isfinite(s) else "")


COLUMNS = (
    ("kl", "KL(oracle‖model)"),
    ("kl_stated", "KL(oracle‖stated)"),
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
"""Columns of the per-step table: metric name and heading."""


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
    panels = [(n, h) for n, h in (("kl", "KL(passive oracle ‖ model) [nats]"),
                                  ("kl_stated", "KL(passive oracle ‖ stated) [nats]"),
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


def _stated_tally(metrics: xr.Dataset) -> str:
    """``; stated replies parsed: P of N (Z give θ* zero mass, S give zero mass to a class the
    oracle keeps)`` over every (episode, turn) with a stated read-out (an unparsed reply is
    counted, never dropped), or nothing without one."""
    if "stated_parsed" not in metrics:
        return ""
    one = metrics.isel(delivery=0) if "delivery" in metrics.dims else metrics  # one per turn
    valid = np.asarray(one["stated_parsed"].values, dtype=np.float64)
    seen = np.isfinite(valid)
    zero = np.asarray(one["stated_zero_truth"].values, dtype=np.float64)
    support = np.asarray(one["stated_zero_support"].values, dtype=np.float64)
    n_parsed = int(np.sum(valid[seen] > 0.5))
    return (f"; stated replies parsed: {n_parsed} of {int(seen.sum())} "
            f"({int(np.nansum(zero))} of the parsed give θ* zero mass, "
            f"{int(np.nansum(support))} give zero mass to a class the oracle keeps)")


def choice_tally(ds: xr.Dataset) -> str:
    """How the model's experiment choices were made (``truth_choice_*``): choices by EIG under
    its revealed belief, by the MCQ, and seeded fallbacks, with the MCQ's parsed rotations;
    ``""`` when the file has no model-chosen sequence."""
    names = [str(n)[len("truth_"):] for n in ds.data_vars
             if str(n).startswith("truth_choice_source_")]
    if not names:
        return ""
    sources = np.concatenate([episode_truth(ds, n).values.astype(str) for n in sorted(names)])
    sources = sources[sources != ""]
    counts = {k: int(np.sum(sources == k)) for k in ("eig", "mcq", "fallback")}
    text = (f"; experiment choices: {sources.size} ({counts['eig']} by EIG under the model's "
            f"revealed belief, {counts['mcq']} by the MCQ, {counts['fallback']} seeded "
            f"fallbacks: {counts['fallback'] / max(sources.size, 1):.0%})")
    steps = [n[len("choice_source_"):] for n in names]
    if has_truth(ds, f"choice_rotations_{steps[0]}"):
        parsed = sum(float(np.nansum(episode_truth(ds, f"choice_parsed_{k}").values))
                     for k in steps)
        rot = sum(float(np.nansum(episode_truth(ds, f"choice_rotations_{k}").values))
                  for k in steps)
        text += f"; MCQ rotations parsed: {int(parsed)} of {int(rot)} ({parsed / max(rot, 1):.0%})"
    return text


def protein_world_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod
) -> Section:
    """The ``protein-world`` section: per-step KL, downstream gap and experiment choice."""
    metrics = step_metrics(ds, method=method)
    summary = step_summary(metrics)
    table = format_steps(summary)
    stated = ("KL(oracle ‖ stated): against the posterior the model states (App. F.3.2, "
              "τ = 1.0), over the replies that parsed, 'stated parsed' the share that did, a "
              "stated 0 floored at 1e-12 (a 0 where the oracle holds mass p adds p·ln(p/1e-12) "
              "nats), 'stated p(θ*)=0' the share of parsed replies giving the true class zero "
              "mass; gap (Fig. 4, as the paper) = active experimenter's p(θ*) after k of its "
              "own experiments minus the model's stated p(θ*) after k, beside it the same "
              "minus its revealed p(θ*); " if "stated_parsed" in metrics else
              "gap = active experimenter's p(θ*) after k of its own experiments minus the "
              "model's revealed p(θ*) after k; ")
    note = (
        "KL(passive oracle ‖ model) in nats (the revealed read-out: the class MCQ's option "
        f"log-probs); {stated}experiment choice = argmax of the model's debiased "
        "next-experiment belief vs the max-EIG experiment, 'ran max-EIG' whether the "
        "experiment run was the max-EIG one (mean ± 1 SEM)"
    ) + _stated_tally(metrics) + choice_tally(ds)
    md = f"{note}.\n\n```\n{table}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = (_plot(summary, out_dir),)
        md += "\n![per step](protein_world_steps.png)\n"
    return Section(title="ProteinWorld: passive and active oracles", text=f"{note}\n\n{table}",
                   markdown=md, files=files)
