"""Every coin-flip variant through the whole pipeline on the tiny model: extraction stores each
episode's own face names and the variant's oracles, and the analysis reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import belieflens
from belieflens.analysis.beliefs import output_beliefs
from belieflens.envs import get
from belieflens.model.load import LoadedModel
from belieflens.run.extract import records


def test_all_variants_extract_and_analyse(tiny_model: LoadedModel, tmp_path: Path) -> None:
    params = {"turns": 3, "prior": "stated", "sides": "random", "summary": "off",
              "reports": "noisy", "changepoint": 0.2, "bins": 3}
    path = belieflens.extract("coin-flip", params=params, model=tiny_model,
                              out=tmp_path / "v.h5", episodes=2, seed=0)
    ds = belieflens.open_cache(path)
    want = list(records(get("coin-flip", **params), 2, 0))
    assert ds.sizes["query"] == len(want)
    stored = np.asarray(ds["oracle"].values)
    for i, rec in enumerate(want):
        assert rec.oracle is not None
        assert np.allclose(stored[i, : len(rec.oracle)], rec.oracle)
    labels = {tuple(x) for x in np.asarray(ds["outcome_label"].values)[:, :2].astype(str)
              if "to" not in x[0]}
    assert len(labels) == 2  # each episode's own faces
    assert set(np.asarray(ds["truth_first_face"].values).astype(str)) == {a for a, _ in labels}
    beliefs = output_beliefs(ds)
    assert np.isfinite(beliefs["belief"].values).any()
    tvd = ds.bl.divergence("tvd")
    assert set(tvd.dims) >= {"delivery", "probe", "episode", "turn"}
    assert float(tvd.max()) <= 1.0
