"""Metrics of both read-outs grouped by variant, with significance tests, as one
``xarray.DataTree`` (:func:`summarise`; :func:`revealed_summary` from a cache file) whose
nodes are the tables below, each a Dataset with a ``variant`` dimension.

Rows are the environment's variants in grid order, then ``all``. The unit is
the grid point (one episode each); means are over grid points ± 1 SEM.

- ``distance``: Chebyshev, L1 and symmetric KL of the revealed belief to the
  truth at the output; ``lens_distance``: the same per layer (logit lens; how it
  scores multi-token outcomes is recorded in ``lens_scoring``, see
  :mod:`belieflens.lens.apply`).
- ``accuracy``: over grid points whose truth has a unique mode, StaA (the stated
  read-out's most likely candidate is the correct one) and RevB (the revealed
  belief's argmax is the mode), each with an exact (Clopper-Pearson) 95% CI, and
  the exact McNemar test of the paired difference (a binomial test on the grid
  points where exactly one read-out is right) with ``*``/``**``/``***`` marks;
  ``lens_accuracy``: StaA and RevB per layer.
- ``bias``: over grid points whose truth is uniform, the revealed belief's mass on
  the first listed outcome next to the expected ``1/|O|``, and the stated
  read-out's raw (not debiased) mass on position ``[[A]]`` next to ``1/5``;
  rows are (variant, |O|).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import xarray as xr

from belieflens.analysis.stats import binomial_test, mcnemar_test, mean_sem
from belieflens.dims import EPISODE, LAYER
from belieflens.envs.revealed.metrics import (
    DEFAULT_EPS,
    distances,
    first_option_mass,
    revealed_correct,
    stated_correct,
)
from belieflens.envs.revealed.readouts import N_CANDIDATES, Readouts, readouts
from belieflens.types import DebiasMethod

VARIANT: Final = "variant"
"""Dimension of the summary tables: one row per variant, then ``all``."""

ALL: Final = "all"
"""Label of the row pooling every grid point."""

METRICS: Final = ("chebyshev", "l1", "sym_kl")
"""Distance metrics, in table order."""


TABLES: Final = ("distance", "accuracy", "bias", "lens_distance", "lens_accuracy")
"""The tables of a summary (the lens tables only where the file has lens read-outs)."""


def table(summary: xr.DataTree, name: str) -> xr.Dataset | None:
    """Table ``name`` of :func:`summarise` as a Dataset, ``None`` where the summary lacks it."""
    return summary[name].to_dataset() if name in summary.children else None


def groups(variant: xr.DataArray) -> list[tuple[str, np.ndarray]]:
    """(row label, boolean episode mask) per variant in order of appearance, then ``all``."""
    v = np.asarray(variant.values).astype(str)
    order = list(dict.fromkeys(v.tolist()))
    rows = [(name, v == name) for name in order]
    return [*rows, (ALL, np.ones(len(v), dtype=bool))] if len(order) > 1 else rows


def _stack(parts: list[xr.DataArray], labels: list[str]) -> xr.DataArray:
    return xr.concat(parts, dim=VARIANT).assign_coords({VARIANT: labels})


def _mean_sem(x: xr.DataArray, rows: list[tuple[str, np.ndarray]]) -> xr.Dataset:
    """:func:`~belieflens.analysis.stats.mean_sem` over episodes, per row's episode mask."""
    labels = [r[0] for r in rows]
    parts = [mean_sem(x.isel({EPISODE: m}), EPISODE) for _, m in rows]
    return xr.Dataset({k: _stack([p[k] for p in parts], labels) for k in ("mean", "sem", "n")})


def distance_table(ds: xr.Dataset, rows: list[tuple[str, np.ndarray]]) -> xr.Dataset:
    """``<metric>_mean``, ``<metric>_sem`` and ``n`` per row, from per-episode distances."""
    out: dict[str, xr.DataArray] = {}
    for m in METRICS:
        s = _mean_sem(ds[m], rows)
        out[f"{m}_mean"] = s["mean"]
        out[f"{m}_sem"] = s["sem"]
        out["n"] = s["n"]
    return xr.Dataset(out)


def accuracy_table(
    sta: xr.DataArray, rev: xr.DataArray, rows: list[tuple[str, np.ndarray]]
) -> xr.Dataset:
    """StaA, RevB with exact CIs, the difference and McNemar's exact p per row.

    Only grid points where both are defined (the truth has a unique mode) count,
    except ``staa_all`` / ``n_all``: StaA over every grid point with a stated read-out.
    """
    names = ("n_all", "staa_all", "n", "staa", "staa_low", "staa_high", "revb", "revb_low",
             "revb_high", "diff", "p_value", "a_only", "b_only")
    cols: dict[str, list[float]] = {k: [] for k in names}
    marks: list[str] = []
    for _, mask in rows:
        a = np.asarray(sta.values, dtype=np.float64)[mask]
        b = np.asarray(rev.values, dtype=np.float64)[mask]
        keep = np.isfinite(a) & np.isfinite(b)
        n = int(keep.sum())
        known = np.isfinite(a)
        cols["n_all"].append(float(known.sum()))
        cols["staa_all"].append(float(a[known].mean()) if known.any() else np.nan)
        if n == 0:
            for k in names[2:]:
                cols[k].append(0.0 if k == "n" else np.nan)
            marks.append("")
            continue
        test = mcnemar_test(a[keep], b[keep])
        ci_a = binomial_test(int(a[keep].sum()), n, 1.0 / N_CANDIDATES)
        ci_b = binomial_test(int(b[keep].sum()), n, 0.5)
        values = (n, test.acc_a, ci_a.ci_low, ci_a.ci_high, test.acc_b, ci_b.ci_low,
                  ci_b.ci_high, test.acc_b - test.acc_a, test.p_value, test.a_only, test.b_only)
        for k, val in zip(names[2:], values, strict=True):
            cols[k].append(float(val))
        marks.append(test.mark)
    labels = [r[0] for r in rows]
    data = {k: (VARIANT, np.asarray(v)) for k, v in cols.items()}
    data["mark"] = (VARIANT, np.asarray(marks, dtype=str))
    return xr.Dataset(data, coords={VARIANT: labels})


def _lens_accuracy(sta: xr.DataArray, rev: xr.DataArray,
                   rows: list[tuple[str, np.ndarray]]) -> xr.Dataset:
    both = sta.notnull() & rev.notnull()
    s = _mean_sem(sta.where(both), rows)
    r = _mean_sem(rev.where(both), rows)
    return xr.Dataset({"staa": s["mean"], "revb": r["mean"], "n": s["n"]})


def bias_table(r: Readouts) -> xr.Dataset:
    """Mass on the first outcome (revealed) and on ``[[A]]`` (stated, raw) where truth is uniform.

    Rows are ``<variant> |O|=<k>``, in order of appearance.
    """
    fm = first_option_mass(r.revealed, r.truth)
    uniform = np.asarray(fm["p_first"].notnull().values)
    k = np.asarray(fm["n_outcome"].values).astype(int)
    v = np.asarray(r.variant.values).astype(str)
    keys = [f"{vi} |O|={ki}" for vi, ki in zip(v, k, strict=True)]
    order = [key for key in dict.fromkeys(keys) if np.any(uniform & (np.asarray(keys) == key))]
    rows = [(key, uniform & (np.asarray(keys) == key)) for key in order]
    if not rows:
        return xr.Dataset(coords={VARIANT: np.array([], dtype=str)})
    pf = _mean_sem(fm["p_first"], rows)
    sa = _mean_sem(r.stated_first_raw, rows)
    return xr.Dataset(
        {
            "n": pf["n"],
            "n_outcome": (VARIANT, np.array([k[m][0] for _, m in rows])),
            "p_first_mean": pf["mean"],
            "p_first_sem": pf["sem"],
            "expected": (VARIANT, np.array([1.0 / k[m][0] for _, m in rows])),
            "stated_a_mean": sa["mean"],
            "stated_a_sem": sa["sem"],
            "stated_expected": (VARIANT, np.full(len(rows), 1.0 / N_CANDIDATES)),
        }
    )


def summarise(r: Readouts, *, eps: float = DEFAULT_EPS) -> xr.DataTree:
    """All tables of the module docstring from paired read-outs: one node per table of
    :data:`TABLES` (the lens tables only where ``r`` has lens read-outs); the root's
    ``attrs`` hold ``eps`` (the KL smoothing) and ``lens_scoring``."""
    rows = groups(r.variant)
    nodes: dict[str, xr.Dataset] = {
        "/": xr.Dataset(attrs={"eps": eps, "lens_scoring": r.lens_scoring}),
        "distance": distance_table(distances(r.revealed, r.truth, eps=eps), rows),
        "accuracy": accuracy_table(stated_correct(r.stated, r.stated_correct),
                                   revealed_correct(r.revealed, r.truth), rows),
        "bias": bias_table(r),
    }
    if r.revealed_lens is not None and r.stated_lens is not None:
        ld = distances(r.revealed_lens, r.truth, eps=eps).transpose(EPISODE, LAYER)
        nodes["lens_distance"] = distance_table(ld, rows)
        nodes["lens_accuracy"] = _lens_accuracy(
            stated_correct(r.stated_lens, r.stated_correct).transpose(EPISODE, LAYER),
            revealed_correct(r.revealed_lens, r.truth).transpose(EPISODE, LAYER),
            rows,
        )
    return xr.DataTree.from_dict(nodes)


def revealed_summary(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.DataTree:
    """:func:`summarise` of a revealed-belief cache file's read-outs."""
    return summarise(readouts(ds, method=method))
