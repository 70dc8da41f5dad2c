"""ProteinWorld metrics of a cache file, as xarray objects: posterior error, downstream gap and
experiment choice per step (:func:`step_metrics`, :func:`step_summary`), and the tallies of the
stated replies and of the model's experiment choices (:func:`stated_tally`,
:func:`choice_counts`).

Per step ``k`` (turn ``k`` = after ``k`` experiments), per delivery, mean ± SEM over episodes:

- where the file holds the stated posterior of App. F.3.2 (``truth_stated_k_c``), the paper's
  measure: the exact posterior on the stated history (the ``class`` probe's oracle) against
  it, oracle first (``kl_stated``, the verbalised read-out), and the share of its replies that
  parsed
  (``stated_parsed``): an unparsed reply is counted there, and has no KL. A stated probability
  of exactly 0 is floored at 1e-12 in the KL (as every KL of the package): a 0 where the
  oracle holds mass ``p`` adds ``p · ln(p / 1e-12)`` (27.6 ``p`` nats); the share of parsed
  replies that give the true class zero mass (``stated_zero_truth``) and that give any class
  the oracle keeps zero mass (``stated_zero_support``) are shown beside it.
- ``KL(passive ‖ model)``: the same against the model's debiased class belief: the revealed
  read-out (``kl``).
- the downstream gap of Fig. 4, ``p_active(θ*) − p_stated(θ*)``, as the paper takes it: the
  active (max-EIG) experimenter's posterior on the true class after ``k`` of its own
  experiments (``truth_p_active_true_k``) minus the model's *stated* posterior on it
  (``gap_stated``, over the replies that parsed), with the revealed one beside it
  (``gap_revealed``: minus the model's debiased class belief).
- where the model chose the experiments (``truth_choice_source_k``): how each choice was made
  (by EIG under its stated posterior or its revealed belief, by the MCQ, or the seeded
  fallback), the MCQ's parsed
  rotations, and whether the experiment run is the max-EIG one under the exact posterior
  (``ran_best``).
- experiment choice (``next-experiment`` probe): the rate at which the model's
  most likely experiment is the max-EIG one (``truth_best_experiment_k``), the
  model's probability of that experiment and, where the file has the EIG of
  every experiment (``truth_eig_k_j``), the EIG regret of the model's pick,
  ``max_j EIG_j − EIG(argmax)``, in nats.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.divergence import kl
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, OUTCOME, TURN
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


def stated_tally(metrics: xr.Dataset) -> xr.Dataset:
    """Over every (episode, turn) of :func:`step_metrics` with a stated read-out (an unparsed
    reply is counted, never dropped): ``replies``, ``parsed``, ``zero_truth`` (parsed replies
    giving θ* zero mass) and ``zero_support`` (giving zero mass to a class the oracle keeps);
    scalars, no variables without a stated read-out."""
    if "stated_parsed" not in metrics:
        return xr.Dataset()
    one = metrics.isel(delivery=0) if "delivery" in metrics.dims else metrics  # one per turn
    valid = np.asarray(one["stated_parsed"].values, dtype=np.float64)
    seen = np.isfinite(valid)
    zero = np.asarray(one["stated_zero_truth"].values, dtype=np.float64)
    support = np.asarray(one["stated_zero_support"].values, dtype=np.float64)
    return xr.Dataset({"replies": int(seen.sum()), "parsed": int(np.sum(valid[seen] > 0.5)),
                       "zero_truth": int(np.nansum(zero)),
                       "zero_support": int(np.nansum(support))})


def choice_counts(ds: xr.Dataset) -> xr.Dataset:
    """How the model's experiment choices were made (``truth_choice_*``): ``choices``, and of
    them ``eig_stated`` (by EIG under its stated posterior), ``eig_revealed`` (under its
    revealed belief; ``eig`` in files written before the stated choice), ``mcq`` (by the MCQ)
    and ``fallback`` (seeded fallbacks); where recorded, the MCQ's ``rotations`` and
    ``rotations_parsed``.
    Scalars; no variables when the file has no model-chosen sequence."""
    names = [str(n)[len("truth_"):] for n in ds.data_vars
             if str(n).startswith("truth_choice_source_")]
    if not names:
        return xr.Dataset()
    sources = np.concatenate([episode_truth(ds, n).values.astype(str) for n in sorted(names)])
    sources = sources[sources != ""]
    sources = np.where(sources == "eig", "eig-revealed", sources)  # files before the stated
    out = xr.Dataset({"choices": sources.size, **{k.replace("-", "_"): int(np.sum(sources == k))
                      for k in ("eig-stated", "eig-revealed", "mcq", "fallback")}})
    steps = [n[len("choice_source_"):] for n in names]
    if has_truth(ds, f"choice_rotations_{steps[0]}"):
        out["rotations_parsed"] = sum(
            float(np.nansum(episode_truth(ds, f"choice_parsed_{k}").values)) for k in steps)
        out["rotations"] = sum(
            float(np.nansum(episode_truth(ds, f"choice_rotations_{k}").values)) for k in steps)
    return out
