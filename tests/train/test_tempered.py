"""A study's evidence weight against the environment's tempered posteriors."""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.dims import DELIVERY, EPISODE, OUTCOME, PROBE, TURN
from belieflens.envs import get
from belieflens.episodes.capabilities import Temperable
from belieflens.run.extract import records
from belieflens.train.tempered import study_evidence_weight, tempered_oracle


def beliefs_of(env: Temperable, episodes: int, strength: float) -> xr.Dataset:
    """A study's debiased beliefs as if its model gave the ``strength`` posterior exactly
    (``belief``), with the oracle and labels as ``output_beliefs`` lays them out."""
    recs = [r for r in records(env, episodes, 0) if r.oracle is not None]
    dims = {d: sorted({getattr(r, d) for r in recs}) for d in (DELIVERY, PROBE, EPISODE, TURN)}
    k = max(len(r.oracle or ()) for r in recs)
    shape = (*(len(v) for v in dims.values()), k)
    labels = np.full((len(dims[PROBE]), k), "", dtype=object)
    for r in recs:
        labels[dims[PROBE].index(r.probe), : len(r.labels)] = r.labels
    base = xr.Dataset(
        {"oracle": ((DELIVERY, PROBE, EPISODE, TURN, OUTCOME), np.full(shape, np.nan)),
         "outcome_label": ((PROBE, OUTCOME), labels.astype(str))},
        coords=dims)
    base = base.assign(oracle=tempered_oracle(env, base, episodes=episodes, seed=0,
                                              strength=1.0))
    belief = tempered_oracle(env, base, episodes=episodes, seed=0, strength=strength)
    return base.assign(belief=belief)


def test_a_model_giving_the_tempered_posterior_measures_its_strength() -> None:
    env = get("coin-flip", turns=6)
    assert isinstance(env, Temperable)
    b = beliefs_of(env, 4, 0.3)
    assert np.isfinite(b["oracle"]).any() and np.isfinite(b["belief"]).any()
    r = study_evidence_weight(env, b, episodes=4, seed=0, rng=np.random.default_rng(0))
    for d in r[DELIVERY].values:
        for p in r[PROBE].values:
            sel = {DELIVERY: d, PROBE: p}
            assert abs(float(r["evidence_weight"].sel(sel)) - 0.3) < 1e-3
            assert abs(float(r["target_evidence_weight"].sel(sel)) - 1.0) < 1e-3
    one = study_evidence_weight(env, beliefs_of(env, 4, 1.0), episodes=4, seed=0,
                                rng=np.random.default_rng(0))
    assert np.allclose(one["evidence_weight"], 1.0, atol=1e-3)
