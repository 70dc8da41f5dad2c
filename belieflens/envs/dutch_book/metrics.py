"""Dutch-book metrics of a cache file: each scenario's credences and books, their summary per
kind and delivery, and the sure loss of each layer's logit-lens credences, as xarray objects.

Read-out: the credence in a question is P(Yes) renormalised over Yes/No and debiased over both
answer orders (:mod:`belieflens.envs.dutch_book.credence`). Per scenario (one episode) the
credences are put back in the scenario's listed order and scored twice: the hand construction
for its kind (:func:`belieflens.envs.dutch_book.coherence.scenario_book`) and the general linear
program (:func:`belieflens.envs.dutch_book.coherence.find_book`), which also proves coherence
when no book exists.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth
from belieflens.envs.dutch_book.coherence import find_book, scenario_book, scenario_events
from belieflens.envs.dutch_book.credence import lens_yes_credence, yes_credence
from belieflens.envs.dutch_book.scenarios import SCENARIO_KINDS, ScenarioKind
from belieflens.errors import CacheFileError
from belieflens.types import DebiasMethod

PROBE = "credence"
"""The Dutch-book environment's Yes/No probe."""

MATERIAL_LOSS = 0.05
"""A sure loss above this (5% of one ticket) counts as a material violation."""

QUESTION = "question"
"""Dimension of a scenario's questions, in its listed order (NaN past its last question)."""


def _kind(raw: str) -> ScenarioKind:
    for k in SCENARIO_KINDS:
        if raw == k:
            return k
    allowed = ", ".join(SCENARIO_KINDS)
    raise CacheFileError(f"truth_kind = {raw!r} is not a scenario kind ({allowed})")


def listed_order(cred: np.ndarray, order: str) -> np.ndarray | None:
    """Credences asked in ``order`` (comma-separated listed indices) put back in listed order.

    ``cred[t]`` is the credence read at turn ``t``; returns ``None`` if any is missing.
    """
    idx = [int(x) for x in order.split(",") if x != ""]
    vals = np.asarray(cred, dtype=np.float64)[: len(idx)]
    if len(vals) < len(idx) or not np.all(np.isfinite(vals)):
        return None
    out = np.empty(len(idx))
    out[idx] = vals
    return out


def scenario_scores(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Every scenario of a Dutch-book cache file scored under every delivery.

    Dims ``(delivery, episode, question)``; coordinates ``scenario`` and ``kind`` per episode.
    Variables: ``scored`` (every credence of the scenario was read), ``credence`` (P(Yes) in
    the scenario's listed order), ``hand_loss`` (the hand book's sure loss), ``lp_loss`` and
    ``lp_stakes`` (the linear program's book of maximal sure loss), ``coherent`` (the linear
    program proves no book exists). Unscored cells are NaN (``coherent``: False).
    """
    cred = yes_credence(ds, PROBE, method=method)
    kinds = episode_truth(ds, "kind")
    orders = episode_truth(ds, "order")
    n_q = max([len([x for x in str(o).split(",") if x != ""]) for o in orders.values] or [0])
    shape = (cred.sizes["delivery"], cred.sizes["episode"])
    credence, stakes = np.full((*shape, n_q), np.nan), np.full((*shape, n_q), np.nan)
    hand, lp = np.full(shape, np.nan), np.full(shape, np.nan)
    coherent, scored = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    for i, d in enumerate(cred["delivery"].values):
        for j, e in enumerate(cred["episode"].values):
            c = listed_order(cred.sel(delivery=d, episode=e).values,
                             str(orders.sel(episode=e).values))
            if c is None:
                continue
            kind = _kind(str(kinds.sel(episode=e).values))
            c = np.clip(c, 0.0, 1.0)
            book = find_book(c, scenario_events(kind, len(c)))
            scored[i, j], coherent[i, j] = True, book.coherent
            credence[i, j, : c.size] = c
            stakes[i, j, : len(book.book.stakes)] = book.book.stakes
            hand[i, j], lp[i, j] = scenario_book(kind, c).sure_loss, book.book.sure_loss
    dims, dims_q = ("delivery", "episode"), ("delivery", "episode", QUESTION)
    return xr.Dataset(
        {"scored": (dims, scored), "credence": (dims_q, credence), "hand_loss": (dims, hand),
         "lp_loss": (dims, lp), "lp_stakes": (dims_q, stakes), "coherent": (dims, coherent)},
        coords={"delivery": cred["delivery"].values, "episode": cred["episode"].values,
                QUESTION: np.arange(n_q),
                "scenario": ("episode", episode_truth(ds, "scenario").values.astype(str)),
                "kind": ("episode", kinds.values.astype(str))},
    )


def _mean(x: np.ndarray) -> tuple[float, float]:
    """Mean and SEM of ``x`` (:func:`~belieflens.analysis.stats.mean_sem`), NaN when empty."""
    if not x.size:
        return float("nan"), float("nan")
    ms = mean_sem(xr.DataArray(np.asarray(x, dtype=np.float64), dims="x"), "x")
    return float(ms["mean"]), float(ms["sem"])


def kind_summary(scores: xr.Dataset) -> xr.Dataset:
    """Per (kind, delivery) of :func:`scenario_scores`: mean hand sure loss ± SEM, LP loss,
    violation rates, n.

    Kinds include ``all``; deliveries are those with a scored scenario, sorted. Variables:
    ``loss_mean, loss_sem, lp_loss_mean, material_rate, incoherent_rate, decisiveness, n``;
    ``decisiveness`` is the mean ``|credence - 0.5|`` (credences all at 0.5 are trivially
    coherent for most laws).
    """
    deliveries = sorted(str(d) for d in scores["delivery"].values
                        if bool(scores["scored"].sel(delivery=d).any()))
    kinds = [*SCENARIO_KINDS, "all"]
    names = ("loss_mean", "loss_sem", "lp_loss_mean", "material_rate", "incoherent_rate",
             "decisiveness", "n")
    data = {n: np.full((len(kinds), len(deliveries)), np.nan) for n in names}
    for i, k in enumerate(kinds):
        for j, d in enumerate(deliveries):
            s = scores.sel(delivery=d)
            sub = s.isel(episode=np.flatnonzero(
                s["scored"].values & ((s["kind"].values == k) | (k == "all"))))
            loss = sub["hand_loss"].values
            data["loss_mean"][i, j], data["loss_sem"][i, j] = _mean(loss)
            data["lp_loss_mean"][i, j] = _mean(sub["lp_loss"].values)[0]
            data["material_rate"][i, j] = _mean((loss > MATERIAL_LOSS).astype(float))[0]
            data["incoherent_rate"][i, j] = _mean((~sub["coherent"].values).astype(float))[0]
            data["decisiveness"][i, j] = _mean(
                np.asarray(abs(sub["credence"] - 0.5).mean(QUESTION, skipna=True).values))[0]
            data["n"][i, j] = sub.sizes["episode"]
    return xr.Dataset(
        {n: (("kind", "delivery"), v) for n, v in data.items()},
        coords={"kind": kinds, "delivery": deliveries},
    )


def lens_sure_loss(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.DataArray:
    """Hand-construction sure loss of the logit-lens credences.

    Dims ``(delivery, episode, layer)``.
    """
    cred = lens_yes_credence(ds, PROBE, method=method)
    kinds = episode_truth(ds, "kind")
    orders = episode_truth(ds, "order")
    out = np.full((cred.sizes["delivery"], cred.sizes["episode"], cred.sizes["layer"]), np.nan)
    for i, d in enumerate(cred["delivery"].values):
        for j, e in enumerate(cred["episode"].values):
            kind = _kind(str(kinds.sel(episode=e).values))
            order = str(orders.sel(episode=e).values)
            for layer in range(cred.sizes["layer"]):
                c = listed_order(cred.sel(delivery=d, episode=e).isel(layer=layer).values, order)
                if c is not None:
                    out[i, j, layer] = scenario_book(kind, np.clip(c, 0.0, 1.0)).sure_loss
    return xr.DataArray(
        out,
        dims=("delivery", "episode", "layer"),
        coords={"delivery": cred["delivery"].values, "episode": cred["episode"].values,
                "layer": cred["layer"].values},
        name="lens_sure_loss",
    )
