"""The positive control in a fast form: the shipped toys (``coin-toy``, ``mess3-toy``) read
out by the same pipeline as any study (extract, then analyze), at a few dozen sequences each.
The full run is ``make positive-control`` (2,000 sequences each)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import belieflens
from belieflens.analysis.geometry import cross_entropy
from belieflens.envs.tokens.metrics import output_agreement
from belieflens.envs.tokens.report import FIGURE, tokens_section


@pytest.fixture(scope="module")
def mess3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pc") / "mess3.h5"
    return belieflens.extract("mess3", model="mess3-toy", episodes=60, seed=0, out=out)


def test_mess3_toy_holds_the_belief_and_predicts_near_the_optimum(mess3: Path,
                                                                  tmp_path: Path) -> None:
    with belieflens.open_cache(mess3) as ds:
        assert ds.sizes["query"] == 60 * 11 and ds.sizes["state"] == 3
        ce = cross_entropy(ds)
        assert float(ce.ratio.sel(turn=slice(2, None)).max()) < 1.03
        g = ds.bl.geometry(n_folds=3)
        best = float(g.r2.max())
        assert best > 0.9 and best > float(g.r2.sel(layer=0))
        assert float(g.r2_shuffled.max()) < 0.1
        section = tokens_section(ds, tmp_path, method="geometric")
        assert "belief_state" in section.text and (tmp_path / FIGURE).is_file()


def test_coin_toy_updates_like_the_posterior(tmp_path: Path) -> None:
    out = belieflens.extract("coin-tokens", model="coin-toy", episodes=12, seed=0,
                             out=tmp_path / "coin.h5")
    with belieflens.open_cache(out) as ds:
        agree = output_agreement(ds)
        assert float(agree.tvd_mean) < 0.05
        assert 0.8 < float(agree.slope) < 1.2
        assert np.isfinite(ds.bl.geometry(target="oracle", n_folds=3).r2).all()
