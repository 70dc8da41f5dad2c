"""Calibration against the oracle: a reliability diagram with the Bayesian posterior as truth.

Cache files store the oracle distribution of every probe, not the realised outcome of the
event it asks about (the next flip is never drawn), so a classical calibration diagram
(predicted probability vs observed frequency) is not available in general. Instead, every
(probe instance, outcome) pair gives the model's probability and the oracle's; binning
the model's probabilities and averaging the oracle's per bin shows whether the model is
over-confident (points below the diagonal at high probabilities, above it at low ones) or
under-confident, relative to an ideal Bayesian reasoner with the same evidence.
"""

from __future__ import annotations

import numpy as np
import xarray as xr


def reliability(beliefs: xr.Dataset, *, bins: int = 10) -> xr.Dataset:
    """Oracle-as-truth reliability per probe and over all probes (``probe = "all"``).

    ``beliefs`` is :func:`~belieflens.analysis.beliefs.output_beliefs` (or any Dataset with
    ``belief``, ``oracle``, ``outcome_label``). Returns, on dims ``(probe, bin)``:
    ``predicted`` (mean model probability in the bin), ``oracle`` (mean oracle probability),
    ``count``; and per probe ``ece``, the count-weighted mean |predicted − oracle| over bins,
    and ``mean_abs``, the unbinned mean |model − oracle| over all pairs. Binning averages the
    oracle within a bin, so a model that answers (nearly) uniformly gets ECE ≈ 0 whatever
    the oracle says; ``mean_abs`` has no such blind spot.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    edges = np.linspace(0.0, 1.0, bins + 1)
    names = [str(p) for p in beliefs["probe"].values]
    groups = [*names, "all"]
    pred = np.full((len(groups), bins), np.nan)
    orc = np.full_like(pred, np.nan)
    count = np.zeros((len(groups), bins), dtype=np.int64)
    ece = np.full(len(groups), np.nan)
    mean_abs = np.full(len(groups), np.nan)
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for name in names:
        b = beliefs["belief"].sel(probe=name)
        o = beliefs["oracle"].sel(probe=name)
        real = beliefs["outcome_label"].sel(probe=name) != ""
        bb, oo = xr.broadcast(b.where(real), o.where(real))
        x, y = bb.values.ravel(), oo.values.ravel()
        ok = np.isfinite(x) & np.isfinite(y)
        pairs.append((x[ok], y[ok]))
    all_x = np.concatenate([p[0] for p in pairs]) if pairs else np.zeros(0)
    all_y = np.concatenate([p[1] for p in pairs]) if pairs else np.zeros(0)
    for g, (x, y) in enumerate([*pairs, (all_x, all_y)]):
        if x.size == 0:
            continue
        mean_abs[g] = float(np.abs(x - y).mean())
        which = np.clip(np.digitize(x, edges[1:-1]), 0, bins - 1)
        for k in range(bins):
            m = which == k
            count[g, k] = int(m.sum())
            if m.any():
                pred[g, k] = float(x[m].mean())
                orc[g, k] = float(y[m].mean())
        seen = count[g] > 0
        ece[g] = float(np.sum(count[g][seen] * np.abs(pred[g][seen] - orc[g][seen]))
                       / count[g].sum())
    centres = 0.5 * (edges[:-1] + edges[1:])
    return xr.Dataset(
        {
            "predicted": (("probe", "bin"), pred),
            "oracle": (("probe", "bin"), orc),
            "count": (("probe", "bin"), count),
            "ece": (("probe",), ece),
            "mean_abs": (("probe",), mean_abs),
        },
        coords={"probe": groups, "bin": centres},
        attrs={"truth": "oracle (Bayesian posterior); realised outcomes are not stored"},
    )
