"""What an intervention result file says: belief transfer, steering slopes, movement to the prior.

Every belief here is debiased over the Latin-square rotations of its probe instance
(:func:`belieflens.analysis.beliefs.pool_rotations`), like the output beliefs of a study.

- **patch**: per pair of instances (base episode, source episode at one delivery, probe and
  turn), the belief transfer ``1 − TVD(p_patched, p_source) / TVD(p_base, p_source)`` (0: the
  patch changed nothing, 1: the base now answers like the source) and the TVD of the patched
  belief to the source's oracle, per layer × position set × turn (mean over pairs);
- **steer**: the slope of the debiased belief's point estimate against α per layer (mean ±
  SEM over instances), along the decoder direction and along the random control, and the
  selectivity (decoder slope − control slope);
- **erase**: how far the erased belief moves toward the prior (the model's own belief at turn
  0): ``1 − TVD(p_erased, p_prior) / TVD(p_clean, p_prior)`` over instances after turn 0, for
  LEACE and for the random subspace, and the held-out decoder R² before and after erasure;
- **interchange**: follow (:mod:`belieflens.analysis.follow`) of a learned rank-k subspace
  swapped from source to base on held-out pairs, ``Σ Δp·Δo / Σ |Δo|²``: the debiased output's
  move ``Δp`` projected on the oracle's move ``Δo`` from the base's posterior to the source's,
  in units of it (1: the output moves as the oracle says; 0: it does not move), per layer,
  split (validation, test) and pairing (any; order: count-preserving order swaps), beside the
  floors at the same rank (random subspaces; the untrained networks' learned subspaces) and
  the clean source's follow; intervals bootstrap the base episodes (and the untrained
  networks); the best layer is chosen on validation pairs and read on test pairs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import belief_mean, instance_logprob
from belieflens.analysis.divergence import tvd, tvd_values
from belieflens.analysis.stats import mean_sem
from belieflens.dims import LAYER, OUTCOME, PAIR, POSITIONS
from belieflens.episodes.latin import debias
from belieflens.types import DebiasMethod

INSTANCE_PAIR = "instance_pair"
"""The dimension of :func:`patch_transfer`: one pair of probe instances (all rotations)."""


def _stats(x: xr.DataArray, dim: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, SEM and count of ``x`` over ``dim`` (:func:`~belieflens.analysis.stats.mean_sem`)."""
    ms = mean_sem(x, dim)
    return ms["mean"].values, ms["sem"].values, ms["n"].values


def patch_beliefs(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """The debiased beliefs of every pair of probe instances of a patch result file.

    Variables ``base``, ``source`` and ``source_oracle`` ``(instance_pair, outcome)`` and
    ``patched`` ``(instance_pair, layer, positions, outcome)`` (NaN past the probe's ``K``,
    and for an instance whose rotations do not show every outcome); ``n_outcome``
    ``(instance_pair,)``; on ``instance_pair`` the coordinates ``delivery, probe, turn,
    episode, source_episode``.
    """
    keys = list(zip(*(np.asarray(ds[n].values).tolist()
                      for n in ("delivery", "probe", "turn", "episode", "source_episode")),
                    strict=True))
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    rot = np.asarray(ds["rotation"].values)
    outcome = np.asarray(ds["outcome"].values, dtype=np.int64)
    n_out = np.asarray(ds["n_outcome"].values, dtype=np.int64)
    patched = np.asarray(ds["patched_logprob"].transpose(PAIR, LAYER, POSITIONS, ...).values)
    base, source = np.asarray(ds["base_logprob"].values), np.asarray(ds["source_logprob"].values)
    s_oracle = np.asarray(ds["source_oracle"].values)
    n_l, n_s, k_max = patched.shape[1], patched.shape[2], int(n_out.max(initial=1))
    pb, ps, po = (np.full((len(groups), k_max), np.nan) for _ in range(3))
    pp = np.full((len(groups), n_l, n_s, k_max), np.nan)
    ks = np.zeros(len(groups), dtype=np.int64)
    names = ("delivery", "probe", "turn", "episode", "source_episode")
    coords: dict[str, list[Any]] = {k: [] for k in names}
    for g, (key, rows_list) in enumerate(sorted(groups.items())):
        for name, v in zip(coords, key, strict=True):
            coords[name].append(v)
        rows = np.array(sorted(rows_list, key=lambda r: rot[r]))
        n_k = ks[g] = int(n_out[rows[0]])
        shown = outcome[rows][:, :n_k]
        if np.any(shown < 0) or np.unique(shown).size < n_k:
            continue  # not every outcome shown: the instance's rotations are incomplete
        pb[g, :n_k] = debias(base[rows][:, :n_k], shown, method=method)
        ps[g, :n_k] = debias(source[rows][:, :n_k], shown, method=method)
        pp[g, ..., :n_k] = debias(np.moveaxis(patched[rows][..., :n_k], 0, -2), shown,
                                  method=method)
        po[g, :n_k] = s_oracle[rows[0], :n_k]
    dim = INSTANCE_PAIR
    return xr.Dataset(
        {"base": ((dim, OUTCOME), pb), "source": ((dim, OUTCOME), ps),
         "patched": ((dim, LAYER, POSITIONS, OUTCOME), pp),
         "source_oracle": ((dim, OUTCOME), po), "n_outcome": (dim, ks)},
        coords={LAYER: ds[LAYER].values, POSITIONS: ds[POSITIONS].values,
                **{k: (dim, np.asarray(v)) for k, v in coords.items()}},
    )


def patch_transfer(ds: xr.Dataset, *, method: DebiasMethod = "geometric",
                   beliefs: xr.Dataset | None = None) -> xr.Dataset:
    """Belief transfer and TVD to the source's oracle per pair of probe instances.

    Returns variables ``transfer`` and ``tvd_source_oracle`` with dims ``(instance_pair, layer,
    positions)`` and, on ``instance_pair``, the coordinates ``delivery, probe, turn, episode,
    source_episode``. ``beliefs``: :func:`patch_beliefs` of ``ds``, where the caller has them.
    """
    b = beliefs if beliefs is not None else patch_beliefs(ds, method=method)
    pb, ps, pp = b["base"].values, b["source"].values, b["patched"].values
    po, ks = b["source_oracle"].values, b["n_outcome"].values
    transfer = np.full(pp.shape[:3], np.nan)
    to_oracle = np.full_like(transfer, np.nan)
    for g, n_k in enumerate(ks.tolist()):
        if not np.isfinite(pb[g, :n_k]).all():
            continue  # the instance's rotations are incomplete
        gap = float(tvd_values(pb[g, :n_k], ps[g, :n_k]))
        if gap > 1e-9:
            transfer[g] = 1.0 - tvd_values(pp[g, ..., :n_k], ps[g, :n_k]) / gap
        to_oracle[g] = tvd_values(pp[g, ..., :n_k], po[g, :n_k])
    dim = INSTANCE_PAIR
    return xr.Dataset(
        {"transfer": ((dim, LAYER, POSITIONS), transfer),
         "tvd_source_oracle": ((dim, LAYER, POSITIONS), to_oracle)},
        coords={k: v for k, v in b.coords.items()},
    )


def patch_summary(per_pair: xr.Dataset) -> xr.Dataset:
    """Means (and SEMs, counts) over instance pairs per ``(delivery, probe, turn, layer,
    positions)``."""
    dim = INSTANCE_PAIR
    out: dict[str, Any] = {}
    keys = sorted({(str(d), str(p), int(t)) for d, p, t in zip(
        per_pair["delivery"].values, per_pair["probe"].values, per_pair["turn"].values,
        strict=True)})
    delivs = sorted({k[0] for k in keys})
    probes = sorted({k[1] for k in keys})
    turns = sorted({k[2] for k in keys})
    shape = (len(delivs), len(probes), len(turns), per_pair.sizes[LAYER],
             per_pair.sizes[POSITIONS])
    for var in ("transfer", "tvd_source_oracle"):
        mean, sem, n = np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape, int)
        for d, p, t in keys:
            sel = ((per_pair["delivery"].values == d) & (per_pair["probe"].values == p)
                   & (per_pair["turn"].values == t))
            m, s, c = _stats(per_pair[var].isel({dim: np.flatnonzero(sel)}), dim)
            i = (delivs.index(d), probes.index(p), turns.index(t))
            mean[i], sem[i], n[i] = m, s, c
        dims = ("delivery", "probe", "turn", LAYER, POSITIONS)
        out[f"{var}_mean"] = (dims, mean)
        out[f"{var}_sem"] = (dims, sem)
        out["n"] = (dims, n)
    return xr.Dataset(out, coords={"delivery": delivs, "probe": probes, "turn": turns,
                                   LAYER: per_pair[LAYER].values,
                                   POSITIONS: per_pair[POSITIONS].values})


def outcome_labels(ds: xr.Dataset) -> dict[str, list[str]]:
    """Each probe's outcome labels (from its first read-out) in a result file."""
    out: dict[str, list[str]] = {}
    labels = np.asarray(ds["outcome_label"].values).astype(str)
    for i, p in enumerate(np.asarray(ds["probe"].values).astype(str)):
        out.setdefault(str(p), [x for x in labels[i] if x])
    return out


def _means(beliefs: xr.DataArray, labels: dict[str, list[str]]) -> xr.DataArray:
    """Point estimate of each belief (per probe's labels), dropping ``outcome``."""
    parts = []
    for p in beliefs["probe"].values:
        b = beliefs.sel(probe=p)
        vals = belief_mean(np.moveaxis(b.transpose(..., OUTCOME).values, -1, -1),
                           labels[str(p)])
        parts.append(b.isel({OUTCOME: 0}, drop=True).copy(data=vals))
    return xr.concat(parts, dim="probe").transpose(*[d for d in beliefs.dims if d != OUTCOME])


def _steer_estimates(ds: xr.Dataset, method: DebiasMethod) -> dict[str, xr.DataArray]:
    """The debiased belief's point estimate under steering along the decoder direction
    (``steered_logprob``) and the random control (``control_logprob``), dims ``(delivery,
    probe, episode, turn, layer, alpha)``."""
    labels = outcome_labels(ds)
    return {var: _means(instance_logprob(ds, ds[var], method=method, extra=(LAYER, "alpha")),
                        labels)
            for var in ("steered_logprob", "control_logprob")}


def steer_curves(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """The steering curves: the debiased belief's point estimate against α per (delivery,
    probe, layer), mean ± SEM over instances, along the decoder direction (``estimate_mean``,
    ``estimate_sem``) and the random control (``control_estimate_mean``,
    ``control_estimate_sem``); dims ``(delivery, probe, layer, alpha)``."""
    est = _steer_estimates(ds, method)
    res: dict[str, Any] = {}
    for var, m in est.items():
        name = "estimate" if var == "steered_logprob" else "control_estimate"
        inst = m.stack(instance=("episode", "turn")).transpose(
            "delivery", "probe", LAYER, "alpha", "instance")
        mean, sem, _ = _stats(inst, "instance")
        dims = ("delivery", "probe", LAYER, "alpha")
        res[f"{name}_mean"], res[f"{name}_sem"] = (dims, mean), (dims, sem)
    ref = est["steered_logprob"]
    return xr.Dataset(res, coords={"delivery": ref["delivery"].values,
                                   "probe": ref["probe"].values, LAYER: ds[LAYER].values,
                                   "alpha": np.asarray(ds["alpha"].values, dtype=np.float64)})


def steer_slopes(ds: xr.Dataset, *, method: DebiasMethod = "geometric"
                 ) -> dict[str, xr.DataArray]:
    """The least-squares slope of each instance's debiased point estimate against α, along
    the decoder direction (``slope``) and the random control (``control_slope``), dims
    ``(delivery, probe, episode, turn, layer)``."""
    alphas = np.asarray(ds["alpha"].values, dtype=np.float64)
    a = alphas - alphas.mean()
    out: dict[str, xr.DataArray] = {}
    for var, m in _steer_estimates(ds, method).items():
        name = "slope" if var == "steered_logprob" else "control_slope"
        mc = m - m.mean("alpha")
        out[name] = (mc * xr.DataArray(a, dims="alpha")).sum("alpha", skipna=False) / float(
            (a**2).sum())
    return out


def steer_summary(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Slope of the debiased belief's point estimate vs α per (delivery, probe, layer):
    ``slope`` (decoder direction), ``control_slope``, ``selectivity`` (mean over instances),
    with SEMs and counts."""
    out = {name: slope.stack(instance=("episode", "turn"))
           for name, slope in steer_slopes(ds, method=method).items()}
    sel = out["slope"] - out["control_slope"]
    res: dict[str, Any] = {}
    for name, da in (*out.items(), ("selectivity", sel)):
        mean, sem, n = _stats(da.transpose("delivery", "probe", LAYER, "instance"), "instance")
        dims = ("delivery", "probe", LAYER)
        res[f"{name}_mean"] = (dims, mean)
        res[f"{name}_sem"] = (dims, sem)
        res["n"] = (dims, n)
    first = out["slope"]  # its layer dim has no coordinate: the file's layers label it
    return xr.Dataset(res, coords={"delivery": first["delivery"].values,
                                   "probe": first["probe"].values, LAYER: ds[LAYER].values})


def erase_summary(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Movement toward the prior per (delivery, probe, layer), for LEACE (``toward_prior``)
    and the random subspace (``control_toward_prior``), and ``tvd_erased_clean``; means ±
    SEM over instances after turn 0."""
    clean = instance_logprob(ds, ds["clean_logprob"], method=method)
    prior = instance_logprob(ds, ds["prior_logprob"], method=method)
    gap = tvd(clean, prior, OUTCOME)
    gap = gap.where(gap > 1e-9)
    later = clean["turn"] > 0
    res: dict[str, Any] = {}
    for var, name in (("erased_logprob", "toward_prior"),
                      ("control_logprob", "control_toward_prior")):
        b = instance_logprob(ds, ds[var], method=method, extra=(LAYER,))
        frac = 1.0 - tvd(b, prior, OUTCOME) / gap
        frac = frac.where(later)
        mean, sem, n = _stats(frac.stack(instance=("episode", "turn")).transpose(
            "delivery", "probe", LAYER, "instance"), "instance")
        dims = ("delivery", "probe", LAYER)
        res[f"{name}_mean"], res[f"{name}_sem"], res["n"] = (dims, mean), (dims, sem), (dims, n)
        if var == "erased_logprob":
            moved = tvd(b, clean, OUTCOME)
            mv = moved.stack(instance=("episode", "turn")).transpose(
                "delivery", "probe", LAYER, "instance")
            res["tvd_erased_clean_mean"] = (dims, _stats(mv, "instance")[0])
    return xr.Dataset(res, coords={"delivery": clean["delivery"].values,
                                   "probe": clean["probe"].values, LAYER: ds[LAYER].values})
