"""Judgment analysis (social judgment, medical triage): no oracle, so invariance and accuracy.

The kernels (:func:`accuracy`, :func:`style_spread`, ...) take debiased label beliefs as
xarray objects over an outcome dimension (``dim``); ground truth is an outcome index. For
triage the outcome index is an ordinal urgency (0 = Emergency ... 3 = Routine), so MAE is in
urgency levels. The tables of a cache file (:func:`judgment_data`, then
:func:`accuracy_table`, :func:`invariance`, :func:`gaps`, :func:`confusions`,
:func:`triage`, :func:`simulator_failures`) are xarray Datasets with named dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.divergence import tvd
from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, OUTCOME, TURN
from belieflens.errors import CacheFileError
from belieflens.types import DebiasMethod

LABEL_PROBES: tuple[str, ...] = ("verdict", "urgency")
"""The label probe of each judgment task."""

STYLE_DIM = "style"
"""Dimension of communication styles in the per-case tables."""

CASE_DIM = "case"
"""Dimension of cases in the per-case tables."""

STYLE_OUTCOME = "style_outcome"
"""Outcome dimension of the style probe's belief (triage) in :func:`judgment_data`."""

ENGAGEMENTS = ("passive", "active")
"""The engagements, in report order."""


def predicted(p: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """The most likely outcome index (ties: the first), NaN where ``p`` has a NaN."""
    index = p.fillna(-1.0).argmax(dim).astype(np.float64)
    return index.where(p.notnull().all(dim))


def accuracy(p: xr.DataArray, truth: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """1.0 where the most likely outcome is the true one, else 0.0; NaN where ``p`` is NaN."""
    pred = predicted(p, dim)
    return (pred == truth).astype(np.float64).where(pred.notnull())


def expected_level(p: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """The expected outcome index under ``p`` (for an ordinal scale such as urgency)."""
    levels = xr.DataArray(np.arange(p.sizes[dim], dtype=np.float64), dims=[dim])
    return (p * levels).sum(dim, skipna=False)


def level_abs_error(p: xr.DataArray, truth: xr.DataArray, dim: str = "outcome") -> xr.DataArray:
    """|E_p[level] - true level|: the absolute error on the ordinal scale (average it for MAE)."""
    return abs(expected_level(p, dim) - truth)


def at_argmax(
    p_given: xr.DataArray, p_condition: xr.DataArray, *, condition_dim: str = "style"
) -> xr.DataArray:
    """``p_given`` at the condition the model finds most likely (urgency at its argmax style)."""
    if condition_dim not in p_given.dims or condition_dim not in p_condition.dims:
        raise ValueError(f"both inputs need dimension {condition_dim!r}")
    return p_given.isel({condition_dim: p_condition.argmax(condition_dim)}, drop=True)


def style_spread(
    p: xr.DataArray, *, style_dim: str = "style", dim: str = "outcome"
) -> xr.DataArray:
    """Per case: mean TVD of each style's label distribution from their average (0 = invariant)."""
    centre = p.mean(style_dim)
    return tvd(p, centre, dim).mean(style_dim)


def scalar_spread(x: xr.DataArray, *, style_dim: str = "style") -> xr.DataArray:
    """Per case: the range (max - min) of a scalar score across styles."""
    return x.max(style_dim) - x.min(style_dim)


def passive_active_gap(
    passive: xr.DataArray, active: xr.DataArray, *, style_dim: str | None = "style"
) -> xr.DataArray:
    """Per case, passive minus active score; averaged over ``style_dim`` if given, else kept."""
    gap = passive - active
    if style_dim is not None and style_dim in gap.dims:
        return gap.mean(style_dim)
    return gap


def confusion(
    p: xr.DataArray, truth: xr.DataArray, labels: Sequence[str], dim: str = "outcome"
) -> xr.DataArray:
    """Counts of (true label, predicted label) over all other elements; dims ``truth, predicted``.

    Elements whose belief is NaN are left out.
    """
    k = len(labels)
    pred, true = xr.broadcast(predicted(p, dim), truth)
    pv = np.asarray(pred.values).ravel()
    tv = np.asarray(true.values).ravel()
    keep = np.isfinite(pv.astype(np.float64)) & np.isfinite(tv.astype(np.float64))
    counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(counts, (tv[keep].astype(np.int64), pv[keep].astype(np.int64)), 1)
    return xr.DataArray(
        counts,
        dims=["truth", "predicted"],
        coords={"truth": list(labels), "predicted": list(labels)},
    )


def _probe(b: xr.Dataset, name: str, var: str = "belief") -> xr.DataArray:
    k = int((b["outcome_label"].sel(probe=name) != "").sum())
    return b[var].sel(probe=name, drop=True).isel({OUTCOME: slice(0, k)})


def last_turn(p: xr.DataArray) -> xr.DataArray:
    """``p`` at the last turn where it has values (per every other coordinate)."""
    valid = p.notnull().all(OUTCOME)
    rank = xr.DataArray(np.arange(1, p.sizes[TURN] + 1), dims=[TURN])
    return p.isel({TURN: (valid * rank).argmax(TURN)})


def _final(p: xr.DataArray) -> xr.DataArray:
    """:func:`last_turn` without its per-cell ``turn`` coordinate (it would clash with the
    ``turn`` dimension of the beliefs beside it)."""
    return last_turn(p).drop_vars(TURN, errors="ignore")


def _labels(b: xr.Dataset, probe: str) -> list[str]:
    return [str(x) for x in b["outcome_label"].sel(probe=probe).values if str(x)]


def judgment_data(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """The label beliefs and episode truth of a judgment cache file.

    Variables: ``belief`` (the label belief, dims ``(delivery, episode, turn, outcome)``),
    ``final`` (at each episode's last turn, ``(delivery, episode, outcome)``), and per
    episode ``truth`` (true label index), ``case``, ``style``, ``engagement`` and, where the
    file records simulator failures, ``simulated`` (False for an active episode with a failed
    simulation). For triage also ``style_final`` (the style belief at the last turn, dims
    ``(delivery, episode, style_outcome)``) and, where every ``urgency|style=…`` probe is
    there, ``conditioned_final`` (the urgency at the model's most likely style). ``attrs``:
    ``probe`` (the label probe), ``labels`` and ``style_labels`` (empty without a style probe).
    """
    b = output_beliefs(ds, method=method)
    probes = [str(p) for p in b["probe"].values]
    found = [p for p in LABEL_PROBES if p in probes]
    if not found:
        raise CacheFileError("judgment cache file lacks a 'verdict' or 'urgency' probe")
    for key in ("label_index", "case", "style", "engagement"):
        if not has_truth(ds, key):
            raise CacheFileError(f"judgment cache file lacks episode truth {key!r}")
    probe = found[0]
    belief = _probe(b, probe).transpose("delivery", EPISODE, TURN, OUTCOME)
    out = xr.Dataset(
        {"belief": belief, "final": _final(belief),
         **{k: episode_truth(ds, key) for k, key in (
             ("truth", "label_index"), ("case", "case"), ("style", "style"),
             ("engagement", "engagement"))}},
        attrs={"probe": probe, "labels": tuple(_labels(b, probe)), "style_labels": ()},
    )
    if has_truth(ds, "sim_failures"):
        out["simulated"] = episode_truth(ds, "sim_failures").fillna(0.0) == 0
    if "style" in probes:
        p_style = _probe(b, "style").transpose("delivery", EPISODE, TURN, OUTCOME)
        styles = _labels(b, "style")
        out.attrs["style_labels"] = tuple(styles)
        out["style_final"] = _final(p_style).rename({OUTCOME: STYLE_OUTCOME})
        cond_names = [f"{probe}|style={s}" for s in styles]
        if all(n in probes for n in cond_names):
            given = xr.concat([_probe(b, n) for n in cond_names], dim=STYLE_DIM)
            cond = at_argmax(given, p_style.rename({OUTCOME: STYLE_DIM}), condition_dim=STYLE_DIM)
            out["conditioned_final"] = _final(cond.transpose("delivery", EPISODE, TURN, OUTCOME))
    return out


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


def styles_of(d: xr.Dataset, engagement: str) -> list[str]:
    """The styles of ``engagement``'s episodes in ``d``, in order of appearance."""
    seen: list[str] = []
    for s, e in zip(d["style"].values, d["engagement"].values, strict=True):
        if str(e) == engagement and str(s) not in seen:
            seen.append(str(s))
    return seen


def _stats(parts: dict[str, xr.DataArray], dim: str) -> xr.Dataset:
    """``{name}_mean``, ``{name}_sem`` and ``n`` (of the first part) over ``dim``."""
    out = xr.Dataset()
    for name, x in parts.items():
        ms = mean_sem(x, dim)
        out[f"{name}_mean"], out[f"{name}_sem"] = ms["mean"], ms["sem"]
        if "n" not in out:
            out["n"] = ms["n"]
    return out


def accuracy_table(d: xr.Dataset) -> xr.Dataset:
    """Accuracy and MAE at the last turn, mean ± SEM over episodes, dims
    ``(delivery, style)`` (passive styles, then active ones): ``acc_mean``, ``acc_sem``,
    ``err_mean``, ``err_sem``, ``n``."""
    acc = accuracy(d["final"], d["truth"])
    err = level_abs_error(d["final"], d["truth"])
    styles = styles_of(d, "passive") + styles_of(d, "active")
    rows = [_stats({"acc": acc.isel({EPISODE: m}), "err": err.isel({EPISODE: m})}, EPISODE)
            for m in ((d["style"] == s).values for s in styles)]
    return xr.concat(rows, dim=STYLE_DIM).assign_coords({STYLE_DIM: styles}).transpose(
        "delivery", STYLE_DIM)


def _simulated(d: xr.Dataset) -> xr.Dataset:
    """``d`` without the active episodes whose simulation failed; ``attrs["left_out"]``."""
    if "simulated" not in d or bool(d["simulated"].all()):
        return d.assign_attrs(left_out=0)
    keep = np.asarray(d["simulated"].values, dtype=bool)
    return d.isel({EPISODE: keep}).assign_attrs(left_out=int((~keep).sum()))


def invariance(d: xr.Dataset) -> xr.Dataset:
    """Invariance across styles (active, simulated episodes, per case).

    Dims ``(delivery)`` and ``(delivery, case)``: ``spread`` (the mean TVD of each style's
    label distribution from the styles' average, per case; NaN for a case with fewer than
    two styles), ``spread_mean``/``spread_sem`` and ``level_mean``/``level_sem`` (the range
    of E[level] across styles) over cases, ``n`` (cases). ``attrs``: ``styles`` (active
    styles found; no variables when fewer than 2) and ``left_out`` (failed simulations).
    """
    u = _simulated(d)
    active = styles_of(u, "active")
    attrs = {"styles": len(active), "left_out": u.attrs["left_out"]}
    if len(active) < 2:
        return xr.Dataset(attrs=attrs)
    p = by_case(u["final"], u["case"], u["style"], active)
    enough = p.notnull().all(OUTCOME).sum(STYLE_DIM) >= 2  # a case needs two styles
    spread = style_spread(p, style_dim=STYLE_DIM, dim=OUTCOME).where(enough)
    level = scalar_spread(expected_level(p, OUTCOME), style_dim=STYLE_DIM).where(enough)
    out = _stats({"spread": spread, "level": level}, CASE_DIM)
    out["spread"] = spread.transpose("delivery", CASE_DIM)
    return out.assign_attrs(attrs)


def gaps(d: xr.Dataset) -> xr.Dataset:
    """Passive minus active, per case, over simulated episodes.

    Dims ``(delivery)``: ``acc_mean``/``acc_sem`` and ``err_mean``/``err_sem`` (the accuracy
    and absolute-error gaps averaged over styles, mean ± SEM over cases), ``n`` (cases); dims
    ``(delivery, style)``: ``acc_by_style`` (mean over cases). ``attrs["left_out"]``: failed
    simulations; no variables without both passive and active episodes.
    """
    u = _simulated(d)
    passive, active = styles_of(u, "passive"), styles_of(u, "active")
    if not (passive and active):
        return xr.Dataset(attrs={"left_out": u.attrs["left_out"]})
    acc = accuracy(u["final"], u["truth"])
    err = level_abs_error(u["final"], u["truth"])
    grid = {name: (by_case(x, u["case"], u["style"], passive).isel({STYLE_DIM: 0}, drop=True),
                   by_case(x, u["case"], u["style"], active))
            for name, x in (("acc", acc), ("err", err))}
    out = _stats({k: passive_active_gap(p, a, style_dim=STYLE_DIM) for k, (p, a) in grid.items()},
                 CASE_DIM)
    per_style = passive_active_gap(*grid["acc"], style_dim=None).mean(CASE_DIM, skipna=True)
    out["acc_by_style"] = per_style.transpose("delivery", STYLE_DIM)
    return out.assign_attrs(left_out=u.attrs["left_out"])


def confusions(d: xr.Dataset) -> xr.DataArray:
    """Confusion matrices at the last turn (true label × the model's most likely label), dims
    ``(delivery, engagement, truth, predicted)``; engagements without episodes are left out."""
    labels = list(d.attrs["labels"])
    present = [e for e in ENGAGEMENTS if bool((d["engagement"] == e).any())]
    per_delivery = []
    for dl in d["delivery"].values:
        per_eng = []
        for eng in present:
            mask = (d["engagement"] == eng).values
            per_eng.append(confusion(d["final"].sel(delivery=dl).isel({EPISODE: mask}),
                                     d["truth"].isel({EPISODE: mask}), labels, OUTCOME))
        per_delivery.append(xr.concat(per_eng, dim="engagement"))
    out = xr.concat(per_delivery, dim="delivery")
    return out.assign_coords(delivery=d["delivery"].values, engagement=present)


def triage(d: xr.Dataset) -> xr.Dataset:
    """The style posterior's accuracy on active episodes (``style_mean``, ``style_sem``) and
    the urgency at the model's most likely style, scored like the direct urgency
    (``cond_acc_mean``/``_sem``, ``cond_err_mean``/``_sem``, ``n``; where the file has it),
    dims ``(delivery)``. No variables without a style probe."""
    if "style_final" not in d:
        return xr.Dataset()
    labels = list(d.attrs["style_labels"])
    amask = (d["engagement"] == "active").values
    true_style = xr.DataArray(
        [float(labels.index(str(s))) if str(s) in labels else np.nan for s in d["style"].values],
        dims=[EPISODE], coords={EPISODE: d[EPISODE]})
    s_acc = accuracy(d["style_final"], true_style, STYLE_OUTCOME)
    out = _stats({"style": s_acc.isel({EPISODE: amask})}, EPISODE).drop_vars("n")
    if "conditioned_final" in d:
        c = d["conditioned_final"]
        out = out.merge(_stats({"cond_acc": accuracy(c, d["truth"]),
                                "cond_err": level_abs_error(c, d["truth"])}, EPISODE))
    return out


def simulator_failures(ds: xr.Dataset) -> xr.Dataset:
    """Segments whose simulation failed every attempt (``failed``), the active episodes
    (``episodes``) and, where recorded, the simulator calls (``calls``); scalars, no
    variables when the file records no simulation."""
    if not has_truth(ds, "sim_failures"):
        return xr.Dataset()
    fails = episode_truth(ds, "sim_failures")
    out = xr.Dataset({"failed": int(np.nansum(fails.values)),
                      "episodes": int(fails.notnull().sum())})
    if has_truth(ds, "sim_attempts"):
        out["calls"] = int(np.nansum(episode_truth(ds, "sim_attempts").values))
    return out
