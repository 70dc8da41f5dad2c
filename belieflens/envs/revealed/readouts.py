"""A cache file's two read-outs of every grid point, paired by episode.

Each grid point of a revealed-belief environment is one episode with one turn
and two probes: ``revealed`` (the outcome distribution as continuations) and
``stated`` (five candidate probabilities, debiased over rotations). This module
pulls both out of a cache file on the dims ``(episode, [layer,] outcome)``,
together with the truth recorded per episode (``truth_<key>`` variables).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import xarray as xr

from belieflens.analysis import truth
from belieflens.analysis.beliefs import lens_beliefs, output_beliefs
from belieflens.dims import EPISODE, OUTCOME, TURN
from belieflens.errors import CacheFileError
from belieflens.types import DebiasMethod

REVEALED: Final = "revealed"
"""Name of the revealed-belief probe."""

STATED: Final = "stated"
"""Name of the stated-answer probe."""

N_CANDIDATES: Final = 5
"""Candidates of the stated-answer question."""


@dataclass(frozen=True, eq=False)
class Readouts:
    """Both read-outs of every grid point in a cache file, on named dims.

    Attributes:
        revealed: debiased output belief over the outcomes, ``(episode, outcome)``.
        truth: the exact outcome distribution (the revealed probe's oracle), same dims.
        stated: debiased output belief over the five candidates, ``(episode, outcome)``.
        stated_correct: the correct candidate's outcome index, ``(episode,)`` (float).
        variant: the grid point's variant, ``(episode,)`` (text; "all" if not recorded).
        stated_first_raw: P(position ``[[A]]``) before debiasing, mean over rotations,
            ``(episode,)``.
        revealed_lens: per-layer lens belief, ``(episode, layer, outcome)``, or ``None``.
        stated_lens: per-layer lens belief over the candidates, or ``None``.
        lens_scoring: how the lens scored multi-token outcomes, as
            :func:`belieflens.analysis.beliefs.lens_beliefs` records it (``first-token``:
            each outcome's first token only, a documented approximation; ``continuation``:
            every token).
    """

    revealed: xr.DataArray
    truth: xr.DataArray
    stated: xr.DataArray
    stated_correct: xr.DataArray
    variant: xr.DataArray
    stated_first_raw: xr.DataArray
    revealed_lens: xr.DataArray | None = None
    stated_lens: xr.DataArray | None = None
    lens_scoring: str = "first-token"


def _one(x: xr.DataArray, probe: str) -> xr.DataArray:
    """Select ``probe`` at the single delivery and turn 0."""
    sub = x.sel(probe=probe).isel(delivery=0).sel({TURN: 0})
    return sub.drop_vars([c for c in ("probe", "delivery", TURN) if c in sub.coords])


def episode_truth(ds: xr.Dataset, key: str, episodes: np.ndarray) -> xr.DataArray | None:
    """The ``truth_<key>`` value of each of ``episodes``, or ``None`` if the file lacks it."""
    if not truth.has_truth(ds, key):
        return None
    return truth.episode_truth(ds, key).sel({EPISODE: episodes})


def stated_first_raw(ds: xr.Dataset, episodes: np.ndarray) -> xr.DataArray:
    """Mean over rotations of P(first position) among the stated options, before debiasing."""
    probe = np.asarray(ds["probe"].values).astype(str)
    ep = np.asarray(ds[EPISODE].values).astype(np.int64)
    rows = np.flatnonzero(probe == STATED)
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)[rows, :N_CANDIDATES]
    lp = lp - lp.max(axis=1, keepdims=True)
    p = np.exp(lp)
    first = p[:, 0] / p.sum(axis=1)
    out = np.array([np.nanmean(first[ep[rows] == e]) if np.any(ep[rows] == e) else np.nan
                    for e in episodes])
    return xr.DataArray(out, dims=(EPISODE,), coords={EPISODE: episodes})


def readouts(ds: xr.Dataset, *, method: DebiasMethod = "geometric", lens: bool = True) -> Readouts:
    """Pair the revealed and stated read-outs of every grid point in ``ds``.

    ``lens=False`` skips the logit lens (no residuals are read).
    """
    probes = set(np.asarray(ds["probe"].values).astype(str))
    for name in (REVEALED, STATED):
        if name not in probes:
            raise CacheFileError(
                f"cache file has no {name!r} probe (has {sorted(probes)}): "
                "not a revealed-belief environment"
            )
    if len(set(np.asarray(ds["delivery"].values).astype(str))) != 1:
        raise CacheFileError("a revealed-belief cache file has one delivery; this one has several")
    if not truth.has_truth(ds, "stated_correct"):
        raise CacheFileError("cache file lacks truth_stated_correct")
    b = output_beliefs(ds, method=method)
    episodes = np.asarray(b[EPISODE].values)
    cand = slice(0, N_CANDIDATES)
    correct = episode_truth(ds, "stated_correct", episodes)
    variant = episode_truth(ds, "variant", episodes)
    assert correct is not None
    if variant is None:
        variant = xr.DataArray(np.full(len(episodes), "all"), dims=(EPISODE,),
                               coords={EPISODE: episodes})
    rev_lens = sta_lens = None
    scoring = "first-token"
    if lens:
        lb = lens_beliefs(ds, method=method)
        scoring = str(lb.attrs.get("multi_token", scoring))
        rev_lens = _one(lb, REVEALED)
        sta_lens = _one(lb, STATED).isel({OUTCOME: cand})
    return Readouts(
        revealed=_one(b["belief"], REVEALED),
        truth=_one(b["oracle"], REVEALED),
        stated=_one(b["belief"], STATED).isel({OUTCOME: cand}),
        stated_correct=correct.astype(np.float64),
        variant=variant.astype(str),
        stated_first_raw=stated_first_raw(ds, episodes),
        revealed_lens=rev_lens,
        stated_lens=sta_lens,
        lens_scoring=scoring,
    )
