"""A model's evidence weight on a study: its point estimates beside the tempered posteriors.

:func:`tempered_estimates` lays the point estimates of an environment's tempered posteriors
(:class:`~belieflens.episodes.capabilities.Temperable`, one per strength) on the grid of a
study's debiased beliefs; :func:`study_evidence_weight` gives, per delivery and belief
question, the evidence weight :func:`belieflens.analysis.evidence_weight.evidence_weight` that
fits the model's turn-to-turn changes, with its bootstrap interval over episodes. A model taught
the posterior with the evidence weighted by ``S`` should measure ``S`` here, which its
updating slope does not (see :mod:`belieflens.analysis.evidence_weight`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from belieflens.analysis.beliefs import point_estimates
from belieflens.analysis.evidence_weight import STRENGTH, evidence_weight
from belieflens.dims import DELIVERY, EPISODE, OUTCOME, PROBE, TURN
from belieflens.episodes.capabilities import Temperable
from belieflens.run.extract import records

STRENGTHS: tuple[float, ...] = tuple(float(x) for x in np.round(np.arange(0.01, 2.0001, 0.01), 2))
"""The default grid of evidence weights: 0.01 to 2 by 0.01 (a tempered posterior needs
S > 0; the estimate refines between grid points)."""


def tempered_oracle(env: Temperable, beliefs: xr.Dataset, *, episodes: int, seed: int,
                    strength: float) -> xr.DataArray:
    """The posterior with the evidence weighted by ``strength`` on ``beliefs``' ``oracle``
    grid (the read-outs of ``episodes`` episodes of ``env`` at ``seed``; NaN where none)."""
    dims = (DELIVERY, PROBE, EPISODE, TURN)
    oracle = beliefs["oracle"].transpose(*dims, OUTCOME)
    out = np.full(oracle.shape, np.nan)
    index = [{v: i for i, v in enumerate(oracle[d].values.tolist())} for d in dims]
    for rec in records(env.tempered(strength), episodes, seed):
        keys = (rec.delivery, rec.probe, rec.episode, rec.turn)
        if rec.oracle is None or any(k not in ix for k, ix in zip(keys, index, strict=True)):
            continue
        at = tuple(ix[k] for k, ix in zip(keys, index, strict=True))
        out[at][: len(rec.oracle)] = rec.oracle
    return oracle.copy(data=out)


def tempered_estimates(env: Temperable, beliefs: xr.Dataset, *, episodes: int, seed: int,
                       strengths: Sequence[float] = STRENGTHS) -> xr.DataArray:
    """The tempered posteriors' point estimates ``(strength, delivery, probe, episode,
    turn)`` on ``beliefs``' grid (the estimate :func:`point_estimates` takes of a belief)."""
    rows = [point_estimates(beliefs.assign(oracle=tempered_oracle(
        env, beliefs, episodes=episodes, seed=seed, strength=s)))["oracle_estimate"]
        for s in strengths]
    return xr.concat(rows, dim=STRENGTH).assign_coords({STRENGTH: list(strengths)})


def study_evidence_weight(env: Temperable, beliefs: xr.Dataset, *, episodes: int, seed: int,
                          rng: np.random.Generator,
                          strengths: Sequence[float] = STRENGTHS) -> xr.Dataset:
    """Per ``(delivery, probe)``: ``evidence_weight`` and its 95% bootstrap interval
    ``evidence_weight_lo`` / ``_hi`` of the model's debiased ``beliefs`` (the
    :func:`~belieflens.analysis.beliefs.output_beliefs` of a study of ``env``'s ``episodes``
    at ``seed``), and ``target_evidence_weight``: the same measure of the oracle's own
    estimates (1 up to the grid's refinement: a check of the measure)."""
    family = tempered_estimates(env, beliefs, episodes=episodes, seed=seed,
                                strengths=strengths)
    est = point_estimates(beliefs)
    shape = (beliefs.sizes[DELIVERY], beliefs.sizes[PROBE])
    vals = {k: np.full(shape, np.nan) for k in ("evidence_weight", "evidence_weight_lo",
                                                 "evidence_weight_hi", "target_evidence_weight")}
    for i, d in enumerate(beliefs[DELIVERY].values):
        for j, p in enumerate(beliefs[PROBE].values):
            sel = {DELIVERY: d, PROBE: p}
            f = family.sel(sel)
            w, lo, hi = evidence_weight(est["estimate"].sel(sel), f, rng=rng)
            vals["evidence_weight"][i, j] = w
            vals["evidence_weight_lo"][i, j] = lo
            vals["evidence_weight_hi"][i, j] = hi
            vals["target_evidence_weight"][i, j] = evidence_weight(
                est["oracle_estimate"].sel(sel), f, rng=rng, n_boot=1)[0]
    coords = {DELIVERY: beliefs[DELIVERY].values, PROBE: beliefs[PROBE].values}
    return xr.Dataset({k: ((DELIVERY, PROBE), v) for k, v in vals.items()}, coords=coords)
