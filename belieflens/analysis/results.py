"""A study's whole analysis as one xarray ``DataTree``: what ``belieflens analyze`` presents.

:func:`study_results` computes, from an open cache file (or study directory), every generic
result of the analysis, each an ``xarray.Dataset`` with named dimensions, as the groups of
one :class:`xarray.DataTree`:

- ``turns``: output beliefs against the oracle per turn (:func:`~.tables.turn_table`);
- ``lens``: the logit lens's TVD to the oracle per layer and turn (:func:`~.tables.lens_table`);
- ``summary``: every source (output, logit lens, tuned lens, linear decoders) per layer and
  turn (:func:`~.summary.summary`);
- ``position_bias``: each rotation's distance from the debiased belief
  (:func:`~.position_bias.position_bias`);
- ``calibration``: reliability against the oracle (:func:`~.calibration.reliability`);
- ``baselines``, with the decoders and the environment's statistic features only: each
  statistic baseline's TVD to the oracle and the decoders' selectivity against the best
  (:func:`~.baselines.baselines`);
- ``episodes``, with ``episodes=True`` only: every instance's beliefs and divergences per
  layer, for a viewer of single episodes (:func:`~.episodes.episode_views`).

The tree's attributes are the file's provenance plus ``debias`` and ``multi_token``. The
stages run in the order that bounds memory: the decoder fits (the peak) first, then the lens
scores, each stage's freed heap handed back before the next (``bench/analysis_stages.py``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.analysis.baselines import Statistics, baselines
from belieflens.analysis.beliefs import lens_beliefs, output_beliefs
from belieflens.analysis.calibration import reliability
from belieflens.analysis.episodes import episode_tokens, episode_views
from belieflens.analysis.position_bias import position_bias
from belieflens.analysis.summary import DECODER_FOLDS, decoder_tvd, summary
from belieflens.analysis.tables import lens_table, turn_table
from belieflens.heap import release_freed_memory
from belieflens.lens import Lens
from belieflens.lens.apply import has_continuations
from belieflens.types import DebiasMethod

GROUPS = ("turns", "lens", "summary", "position_bias", "calibration")
"""The groups of :func:`study_results`, in the order a report presents them."""


def study_results(
    ds: xr.Dataset,
    *,
    method: DebiasMethod = "geometric",
    lens: Lens | None = None,
    decoders: bool = True,
    seed: int = 0,
    episodes: bool = False,
    statistics: Statistics | None = None,
    decoder_rows: xr.DataArray | None = None,
) -> xr.DataTree:
    """Every generic result of the analysis of ``ds`` (module docstring for the groups).

    ``lens`` is the tuned-lens column's lens (checked against the file first), ``decoders``
    fits the linear decoders with folds drawn from ``seed``. ``episodes`` adds the group
    ``episodes`` (the logit lens's beliefs, and the tuned lens's with ``lens``, per instance,
    and the tokens of the read-out shown for each: :func:`~.episodes.episode_tokens`).
    ``statistics``: the statistic baselines' features
    (``belieflens.envs.statistic_features(ds)``), which add the group ``baselines`` beside
    the decoders. ``decoder_rows``: the decoders' :func:`~.summary.decoder_tvd` from ``seed``,
    where the caller has it.
    """
    if lens is not None:
        lens.check_file(ds)
    # the decoder fits are the analysis's memory peak: run them before the other results
    # are held, as summary would run them (its defaults: seed's generator, folds)
    rows = decoder_rows
    if decoders and rows is None:
        rows = decoder_tvd(ds, np.random.default_rng(seed), n_folds=DECODER_FOLDS)
    release_freed_memory()
    # the lens next, its [query, layer, option] scores and chunk tasks the next peak:
    # before the output beliefs and their tables are held too
    logit = lens_beliefs(ds, method=method)
    release_freed_memory()
    beliefs = output_beliefs(ds, method=method)
    turns = turn_table(beliefs)
    ltable = lens_table(logit, beliefs["oracle"], beliefs["outcome_label"])
    summ = summary(ds, lens, method=method, decoders=decoders, seed=seed, logit_lens=logit,
                   decoder_rows=rows)
    release_freed_memory()
    groups = {"turns": turns, "lens": ltable, "summary": summ,
              "position_bias": position_bias(ds, method=method),
              "calibration": reliability(beliefs)}
    if decoders and statistics:
        groups["baselines"] = baselines(ds, statistics, seed=seed, decoder=rows)
    if episodes:
        lenses = {"logit-lens": logit}
        if lens is not None:
            lenses["tuned-lens"] = lens_beliefs(ds, method=method, lens=lens)
        groups["episodes"] = xr.merge([episode_views(beliefs, lenses), episode_tokens(ds)],
                                      combine_attrs="override")
    tree = xr.DataTree.from_dict({f"/{k}": v for k, v in groups.items()})
    tree.attrs = {**ds.attrs, "debias": method,
                  "multi_token": "continuation" if has_continuations(ds) else "first-token"}
    return tree
