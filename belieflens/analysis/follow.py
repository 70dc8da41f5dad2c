"""Follow: how far an intervention moves the output along the oracle's move.

For a pair of probe instances (base, source), the **oracle's move** is ``Δo = o_source −
o_base``, from the base's exact posterior answer to the source's, and the **output's move** is
``Δp = p_edited − p_base``, the debiased output belief with the edit minus without. Over a set
of pairs::

    follow = Σ Δp · Δo / Σ |Δo|²

the output's move projected on the oracle's, in units of the oracle's: 1 when the output moves
as the oracle says, 0 when it does not move, below 0 when it moves the other way, whatever the
direction of a pair's move. A pair whose oracle does not move adds nothing to either sum: on
**count-preserving order swaps** (:mod:`belieflens.interventions.swaps`) of a process whose
oracle conditions on counts alone, follow is undefined, and ``moved`` (the mean TVD of the
edited output to the base's) says whether the output moved anyway; ``oracle_moved`` is the
mean TVD of the two oracles.

Intervals are percentile bootstraps over **base episodes** (the pairs of one base episode,
its turns, are resampled together), seeded; a floor over several control networks resamples
the networks too in each draw, so its interval covers the spread from one seed of weights to
the next (:func:`follow_intervals`).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.dims import OPTION, OUTCOME, PAIR
from belieflens.episodes.latin import debias
from belieflens.types import DebiasMethod

F64 = NDArray[np.float64]

INSTANCE_PAIR = "instance_pair"
"""The dimension of one pair of probe instances (all rotations of base and source)."""

KEYS: tuple[str, ...] = ("delivery", "probe", "turn", "episode", "source_episode")
"""Per-pair variables that name a pair's probe instances."""

RESAMPLES = 2000
"""Bootstrap draws of an interval."""

CONFIDENCE = 0.95
"""Coverage of an interval."""


@dataclass(frozen=True, eq=False)
class Instances:
    """The pairs of a result grouped into instance pairs: each one's rows (sorted by rotation)
    and outcome order, and its coordinates on :data:`INSTANCE_PAIR`."""

    rows: list[NDArray[np.int64]]
    shown: list[NDArray[np.int64]]
    coords: dict[str, NDArray[Any]]
    k: int
    """The most outcomes of any instance."""


def instances(ds: xr.Dataset, extra: Sequence[str] = ()) -> Instances:
    """Group the ``pair`` rows of ``ds`` by :data:`KEYS` and the per-pair variables
    ``extra``; instances whose rotations do not show every outcome are dropped."""
    names = [n for n in (*KEYS, *extra) if n in ds.variables]
    cols = [np.asarray(ds[n].values) for n in names]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(zip(*(c.tolist() for c in cols), strict=True)):
        groups.setdefault(tuple(key), []).append(i)
    rot = np.asarray(ds["rotation"].values)
    outcome = np.asarray(ds["outcome"].values, dtype=np.int64)
    n_out = np.asarray(ds["n_outcome"].values, dtype=np.int64)
    rows, shown, kept = [], [], []
    for key, members in sorted(groups.items()):
        r = np.array(sorted(members, key=lambda m: rot[m]), dtype=np.int64)
        n_k = int(n_out[r[0]])
        s = outcome[r][:, :n_k]
        if np.any(s < 0) or np.unique(s).size < n_k:
            continue
        rows.append(r)
        shown.append(s)
        kept.append(key)
    coords = {n: np.asarray([k[i] for k in kept]) for i, n in enumerate(names)}
    return Instances(rows, shown, coords, int(n_out.max(initial=1)))


def instance_beliefs(ds: xr.Dataset, var: str, inst: Instances, *,
                     method: DebiasMethod = "geometric") -> xr.DataArray:
    """The debiased belief of each instance pair under ``var`` (option log-probs with a
    ``pair`` and an ``option`` dim): dims ``(instance_pair, <var's other dims>, outcome)``,
    NaN past an instance's outcomes."""
    da = ds[var].transpose(PAIR, ..., OPTION)
    lp = np.asarray(da.values, dtype=np.float64)
    out = np.full((len(inst.rows), *lp.shape[1:-1], inst.k), np.nan)
    for g, (rows, shown) in enumerate(zip(inst.rows, inst.shown, strict=True)):
        n_k = shown.shape[1]
        out[g, ..., :n_k] = debias(np.moveaxis(lp[rows][..., :n_k], 0, -2), shown,
                                   method=method)
    dims = (INSTANCE_PAIR, *[str(d) for d in da.dims[1:-1]], OUTCOME)
    coords = {str(d): ds[d].values for d in da.dims[1:-1] if d in ds.coords}
    return xr.DataArray(out, dims=dims, coords=coords)


def oracle_move(ds: xr.Dataset, inst: Instances) -> xr.DataArray:
    """``Δo``: each instance pair's source oracle minus its base oracle, ``(instance_pair,
    outcome)`` (0 past an instance's outcomes)."""
    first = np.array([r[0] for r in inst.rows], dtype=np.int64)
    base = np.asarray(ds["oracle"].values, dtype=np.float64)[first, : inst.k]
    source = np.asarray(ds["source_oracle"].values, dtype=np.float64)[first, : inst.k]
    return xr.DataArray(np.nan_to_num(source - base), dims=(INSTANCE_PAIR, OUTCOME))


def move_terms(edited: xr.DataArray, base: xr.DataArray, d_oracle: xr.DataArray
               ) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Per instance pair: ``Δp · Δo`` (the numerator of follow), ``|Δo|²`` (its denominator)
    and the TVD of the edited output to the base's (``moved``)."""
    dp = (edited - base).fillna(0.0)
    num = (dp * d_oracle).sum(OUTCOME)
    den = (d_oracle**2).sum(OUTCOME)
    moved = 0.5 * abs(dp).sum(OUTCOME)
    return num, den, moved


def episode_weights(episodes: NDArray[Any], rng: np.random.Generator,
                    n: int = RESAMPLES) -> F64:
    """Bootstrap weights ``[draw, instance pair]``: how often each pair's base episode is
    drawn when the episodes are resampled with replacement."""
    eps, idx = np.unique(episodes, return_inverse=True)
    if eps.size == 0:
        return np.zeros((n, 0))
    counts = rng.multinomial(eps.size, np.full(eps.size, 1.0 / eps.size), size=n)
    return np.asarray(counts[:, idx], dtype=np.float64)


def ratio(num: F64, den: F64) -> F64:
    """``num / den`` with NaN where ``den`` is 0."""
    with np.errstate(all="ignore"):
        return np.asarray(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan),
                          dtype=np.float64)


def interval(draws: F64) -> tuple[F64, F64]:
    """The :data:`CONFIDENCE` percentile interval of bootstrap ``draws`` (first axis)."""
    a = (1.0 - CONFIDENCE) / 2.0
    with np.errstate(all="ignore"), _nan_quiet():
        return (np.asarray(np.nanquantile(draws, a, axis=0), dtype=np.float64),
                np.asarray(np.nanquantile(draws, 1.0 - a, axis=0), dtype=np.float64))


@contextlib.contextmanager
def _nan_quiet() -> Iterator[None]:
    """Inside the block, numpy's warnings about all-NaN slices are silent."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def follow_draws(num: F64, den: F64, weights: F64) -> F64:
    """Follow in every bootstrap draw ``[draw, ...]`` from per-pair terms ``num [pair, ...]``
    and ``den [pair]``."""
    n = np.tensordot(weights, num, axes=(1, 0))
    d = weights @ den
    return ratio(n, d.reshape(d.shape + (1,) * (n.ndim - 1)))


def seed_mean_draws(draws: F64, rng: np.random.Generator) -> F64:
    """The mean over control networks (axis 1 of ``draws [draw, network, ...]``) with the
    networks resampled with replacement in each draw."""
    b, m = draws.shape[:2]
    pick = rng.integers(0, m, size=(b, m))
    chosen = np.take_along_axis(draws, pick.reshape(b, m, *([1] * (draws.ndim - 2))), axis=1)
    with np.errstate(all="ignore"), _nan_quiet():
        return np.asarray(np.nanmean(chosen, axis=1), dtype=np.float64)


TRAINED = "trained"
"""The ``model`` label of the network under study in an interchange result (the others are
its untrained controls, labelled by their ``--init``)."""


def _terms(ds: xr.Dataset, inst: Instances, method: DebiasMethod
           ) -> dict[str, xr.DataArray]:
    """Per instance pair: follow's numerator for the learned subspace (``num``), the random
    ones (``control_num``, mean over draws) and the clean source (``source_num``), its
    denominator (``den``), and the TVDs ``moved``, ``control_moved``, ``oracle_moved``."""
    beliefs = {v: instance_beliefs(ds, v, inst, method=method)
               for v in ("swapped_logprob", "control_logprob", "base_logprob",
                         "source_logprob")}
    d_oracle = oracle_move(ds, inst)
    base = beliefs["base_logprob"]
    num, den, moved = move_terms(beliefs["swapped_logprob"], base, d_oracle)
    cnum, _, cmoved = move_terms(beliefs["control_logprob"], base, d_oracle)
    snum, _, _ = move_terms(beliefs["source_logprob"], base, d_oracle)
    return {"num": num, "den": den, "moved": moved, "control_num": cnum.mean("draw"),
            "control_moved": cmoved.mean("draw"), "source_num": snum,
            "oracle_moved": 0.5 * abs(d_oracle).sum(OUTCOME)}


def interchange_follow(ds: xr.Dataset, *, method: DebiasMethod = "geometric",
                       seed: int = 0) -> xr.Dataset:
    """Follow of an interchange result (:mod:`belieflens.interventions.interchange`) per
    ``(model, split, pairing, layer)``: the learned subspace's (``follow``), the random
    subspaces' at the same rank (``control_follow``), the clean source's (``source_follow``,
    what a swap of everything the output reads gives), each with its interval (``_low``,
    ``_high``); the mean TVDs ``moved``, ``control_moved``, ``oracle_moved``; the instance
    pairs ``n`` and those whose oracle moves ``n_moving``. On the trained network, per
    ``(split, pairing, layer)``, how far the learned subspace is above each floor:
    ``gap_random`` (its random subspaces) and ``gap_untrained`` (the untrained networks'
    learned subspaces, their mean), and above the larger of the two (``gap``), with
    intervals from the same draws (:func:`follow_intervals`)."""
    inst = instances(ds, ("split", "pairing"))
    terms = _terms(ds, inst, method)
    splits = [s for s in ("validation", "test") if s in set(inst.coords["split"].tolist())]
    pairings = sorted(set(inst.coords["pairing"].tolist()))
    rng = np.random.default_rng(seed)
    parts = [[follow_intervals(terms, inst, s, p, rng) for p in pairings] for s in splits]
    out = xr.combine_nested(parts, concat_dim=["split", "pairing"])
    out = out.assign_coords(split=splits, pairing=pairings)
    out.attrs.update(resamples=RESAMPLES, confidence=CONFIDENCE, seed=seed,
                     interval="percentile bootstrap over base episodes; the untrained floor "
                     "also resamples the untrained networks")
    return out


def follow_intervals(terms: dict[str, xr.DataArray], inst: Instances, split: str,
                     pairing: str, rng: np.random.Generator) -> xr.Dataset:
    """The :func:`interchange_follow` variables of the instance pairs of one split and
    pairing: every draw resamples their base episodes, and the untrained networks."""
    keep = np.flatnonzero((inst.coords["split"] == split) & (inst.coords["pairing"] == pairing))
    t = {k: v.isel({INSTANCE_PAIR: keep}) for k, v in terms.items()}
    models = [str(m) for m in t["num"]["model"].values]
    num = t["num"].transpose(INSTANCE_PAIR, "model", "layer").values
    cnum = t["control_num"].transpose(INSTANCE_PAIR, "model", "layer").values
    snum = t["source_num"].transpose(INSTANCE_PAIR, "model").values
    den = t["den"].values
    w = episode_weights(inst.coords["episode"][keep], rng)
    draws = {"follow": follow_draws(num, den, w), "control_follow": follow_draws(cnum, den, w),
             "source_follow": follow_draws(snum, den, w)}
    point = {"follow": ratio(num.sum(0), np.full(num.shape[1:], den.sum())),
             "control_follow": ratio(cnum.sum(0), np.full(cnum.shape[1:], den.sum())),
             "source_follow": ratio(snum.sum(0), np.full(snum.shape[1:], den.sum()))}
    data: dict[str, Any] = {}
    for name, est in point.items():
        dims = ("model", "layer") if est.ndim == 2 else ("model",)
        lo, hi = interval(draws[name])
        data[name], data[f"{name}_low"], data[f"{name}_high"] = (dims, est), (dims, lo), \
            (dims, hi)
    for name in ("moved", "control_moved"):
        data[name] = (("model", "layer"), t[name].transpose(INSTANCE_PAIR, "model", "layer")
                      .mean(INSTANCE_PAIR).values)
    data["oracle_moved"] = ((), float(t["oracle_moved"].mean())) if keep.size else ((), np.nan)
    data["n"] = ((), int(keep.size))
    data["n_moving"] = ((), int((den > 1e-12).sum()))
    data.update(_gaps(models, point, draws, rng))
    return xr.Dataset(data, coords={"model": models, "layer": terms["num"]["layer"].values})


def _gaps(models: list[str], point: dict[str, F64], draws: dict[str, F64],
          rng: np.random.Generator) -> dict[str, Any]:
    """The trained network's learned follow above each floor, point and interval."""
    if TRAINED not in models:
        return {}
    i = models.index(TRAINED)
    others = [j for j in range(len(models)) if j != i]
    floors_pt = {"random": point["control_follow"][i]}
    floors_dr = {"random": draws["control_follow"][:, i]}
    if others:
        floors_pt["untrained"] = np.mean(point["follow"][others], axis=0)
        floors_dr["untrained"] = seed_mean_draws(draws["follow"][:, others], rng)
    floors_pt["floor"] = np.max(np.stack(list(floors_pt.values())), axis=0)
    floors_dr["floor"] = np.max(np.stack(list(floors_dr.values())), axis=0)
    out: dict[str, Any] = {}
    for name in floors_pt:
        key = "gap" if name == "floor" else f"gap_{name}"
        lo, hi = interval(draws["follow"][:, i] - floors_dr[name])
        est = point["follow"][i] - floors_pt[name]
        out[key], out[f"{key}_low"], out[f"{key}_high"] = ("layer", est), ("layer", lo), \
            ("layer", hi)
        if name != "floor":
            out[f"{name}_floor"] = ("layer", floors_pt[name])
    return out


def chosen_pairing(summary: xr.Dataset) -> str:
    """The pairing a best layer is chosen on: ``any`` where it was scored, else the first."""
    names = [str(p) for p in summary["pairing"].values]
    return "any" if "any" in names else names[0]


def best_layer(summary: xr.Dataset) -> int | None:
    """The layer of the largest ``gap`` (the learned subspace above its larger floor) on the
    validation pairs of :func:`chosen_pairing`, the layer a test result is read at; ``None``
    without validation pairs or a finite gap."""
    if "gap" not in summary or "validation" not in summary["split"].values:
        return None
    gap = summary["gap"].sel(split="validation", pairing=chosen_pairing(summary)).values
    if not np.isfinite(gap).any():
        return None
    return int(summary["layer"].values[int(np.nanargmax(gap))])


def patch_follow(ds: xr.Dataset, *, method: DebiasMethod = "geometric",
                 seed: int = 0) -> xr.Dataset:
    """Follow of a patch result (:mod:`belieflens.interventions.patch`) per ``(pairing, layer,
    positions)``, with its interval (``follow_low``, ``follow_high``), the clean source's
    follow (``source_follow``), the mean TVD of the patched output to the base's (``moved``)
    and of the oracles (``oracle_moved``), and the instance pairs ``n`` and ``n_moving``. A
    file without ``pairing`` (its pairs: differing episodes) is the ``any`` pairing. Where the
    file holds untrained networks patched the same way, their mean follow
    (``untrained_floor``, with an interval that resamples the networks too) and the gap over
    it (``gap_untrained``, from the same draws)."""
    inst = instances(ds, ("pairing",))
    pairing = (inst.coords["pairing"] if "pairing" in inst.coords
               else np.full(len(inst.rows), "any", dtype=object))
    d_oracle = oracle_move(ds, inst)
    terms = {}
    for prefix in ("", "untrained_") if "untrained_patched_logprob" in ds else ("",):
        base = instance_beliefs(ds, f"{prefix}base_logprob", inst, method=method)
        num, den, moved = move_terms(instance_beliefs(ds, f"{prefix}patched_logprob", inst,
                                                      method=method), base, d_oracle)
        terms[f"{prefix}num"], terms["den"], terms[f"{prefix}moved"] = num, den, moved
        terms[f"{prefix}source_num"] = move_terms(instance_beliefs(
            ds, f"{prefix}source_logprob", inst, method=method), base, d_oracle)[0]
    rng = np.random.default_rng(seed)
    names = sorted({str(p) for p in pairing.tolist()})
    parts = [_patch_part(terms, d_oracle, inst, np.flatnonzero(pairing == n), rng)
             for n in names]
    out = xr.concat(parts, dim="pairing").assign_coords(pairing=names)
    out.attrs.update(resamples=RESAMPLES, confidence=CONFIDENCE, seed=seed,
                     interval="percentile bootstrap over base episodes; the untrained floor "
                     "also resamples the untrained networks")
    return out


def _patch_part(terms: dict[str, xr.DataArray], d_oracle: xr.DataArray, inst: Instances,
                keep: NDArray[np.int64], rng: np.random.Generator) -> xr.Dataset:
    """:func:`patch_follow`'s variables over the instance pairs ``keep``."""
    def take(name: str) -> xr.DataArray:
        return terms[name].isel({INSTANCE_PAIR: keep}).transpose(INSTANCE_PAIR, ...)

    n, d = take("num"), terms["den"].values[keep]
    w = episode_weights(inst.coords["episode"][keep], rng)
    draws = follow_draws(n.values, d, w)
    dims = n.dims[1:]
    lo, hi = interval(draws)
    est = ratio(n.values.sum(0), np.full(n.shape[1:], d.sum()))
    s = take("source_num").values
    data: dict[str, Any] = {
        "follow": (dims, est), "follow_low": (dims, lo), "follow_high": (dims, hi),
        "source_follow": ((), float(ratio(np.array(s.sum()), np.array(d.sum())))),
        "moved": take("moved").mean(INSTANCE_PAIR),
        "oracle_moved": ((), float(0.5 * np.abs(d_oracle.values[keep]).sum(-1).mean())),
        "n": ((), int(keep.size)), "n_moving": ((), int((d > 1e-12).sum()))}
    if "untrained_num" in terms:
        u = take("untrained_num").transpose(INSTANCE_PAIR, "model", ...)
        u_draws = seed_mean_draws(follow_draws(u.values, d, w), rng)
        floor = np.mean(ratio(u.values.sum(0), np.full(u.shape[1:], d.sum())), axis=0)
        data["untrained_floor"] = (dims, floor)
        data["untrained_floor_low"], data["untrained_floor_high"] = (
            (dims, x) for x in interval(u_draws))
        data["gap_untrained"] = (dims, est - floor)
        data["gap_untrained_low"], data["gap_untrained_high"] = (
            (dims, x) for x in interval(draws - u_draws))
    coords = {k: v for k, v in n.coords.items() if k != INSTANCE_PAIR}
    return xr.Dataset(data, coords=coords)


def steer_follow(summary: xr.Dataset, ds: xr.Dataset) -> xr.Dataset | None:
    """Steering on the follow scale: the slope of the output's point estimate per unit α
    (:func:`~belieflens.analysis.interventions.steer_summary`) divided by how far the
    decoder reads the concept move per unit α (``fold_gain``, mean over folds), for the
    decoder direction (``follow_mean``, ``follow_sem``) and the random one
    (``control_follow_mean``, ``control_follow_sem``): 1 when the output moves as far as the
    decoded oracle belief was moved. ``None`` for a file without gains (a direction that
    decodes no concept, or a file written before they were stored)."""
    if "fold_gain" not in ds or not np.isfinite(ds["fold_gain"].values).any():
        return None
    gain = ds["fold_gain"].mean("fold").where(lambda g: g > 0)
    out = xr.Dataset({f"{new}_{x}": summary[f"{old}_{x}"] / gain
                      for new, old in (("follow", "slope"), ("control_follow", "control_slope"))
                      for x in ("mean", "sem")})
    return out
