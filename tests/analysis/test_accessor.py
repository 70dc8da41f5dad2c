"""``ds.bl``: the accessor wraps the analysis functions and returns named xarray objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import belieflens.analysis  # noqa: F401  (registers ds.bl)
from belieflens.analysis import divergence as dv
from belieflens.analysis.accessor import METRICS, BeliefLensAccessor
from belieflens.analysis.beliefs import lens_beliefs, output_beliefs
from belieflens.analysis.summary import summary
from belieflens.errors import BeliefLensError
from belieflens.lens import LogitLens, TunedLens, TunedLensConfig, TunedLensError
from belieflens.model.load import LoadedModel
from tests.lens.test_apply import N_LAYER, D, synthetic

INSTANCE = ("delivery", "probe", "episode", "turn")


def _tuned(ds: xr.Dataset, weights_hash: str = "w" * 64) -> TunedLens:
    rng = np.random.default_rng(0)
    cfg = TunedLensConfig(model_id="m", revision="r", weights_hash=weights_hash,
                          unembed_hash="u" * 64, n_layers=N_LAYER, d_model=D, vocab_size=7)
    return TunedLens(cfg, rng.normal(size=(N_LAYER, D, D)) * 0.1, rng.normal(size=(N_LAYER, D)))


def test_accessor_is_registered() -> None:
    assert isinstance(synthetic().bl, BeliefLensAccessor)


def test_beliefs_by_source() -> None:
    ds = synthetic()
    out = ds.bl.beliefs()
    assert out.dims == (*INSTANCE, "outcome")
    xr.testing.assert_identical(out.drop_attrs(), output_beliefs(ds)["belief"].drop_attrs())
    logit = ds.bl.beliefs(source="logit-lens", method="arithmetic")
    assert logit.dims == (*INSTANCE, "layer", "outcome")
    xr.testing.assert_identical(logit, lens_beliefs(ds, method="arithmetic"))
    xr.testing.assert_identical(ds.bl.beliefs(source=LogitLens()), lens_beliefs(ds))
    ds.attrs["weights_hash"] = "w" * 64
    tuned = ds.bl.beliefs(source=_tuned(ds))
    assert tuned.attrs["lens"] == "tuned" and not np.allclose(tuned, lens_beliefs(ds))
    with pytest.raises(TunedLensError):
        ds.bl.beliefs(source=_tuned(ds, weights_hash="x" * 64))
    with pytest.raises(BeliefLensError, match="source"):
        ds.bl.beliefs(source="nope")


@pytest.mark.parametrize("metric", METRICS)
def test_divergence_every_metric(metric: Any) -> None:
    ds = synthetic()
    got = ds.bl.divergence(metric)
    assert got.dims == INSTANCE and got.name == metric
    assert got.attrs == {"metric": metric, "source": "output", "debias": "geometric"}
    assert np.isfinite(got).all() and (got >= 0).all()
    per_layer = ds.bl.divergence(metric, source="logit-lens")
    assert per_layer.dims == (*INSTANCE, "layer")


def test_divergence_matches_the_functions_and_summary() -> None:
    ds = synthetic()
    b = output_beliefs(ds)
    for metric, fn in (("tvd", dv.tvd), ("kl", dv.kl), ("js", dv.js)):
        xr.testing.assert_allclose(ds.bl.divergence(metric).drop_attrs(),
                                   fn(b["oracle"], b["belief"], "outcome").rename(metric))
    s = summary(ds, decoders=False)
    lens_tvd = ds.bl.divergence("tvd", source="logit-lens").mean("episode")
    np.testing.assert_allclose(
        s["tvd_mean"].sel(source="logit-lens").values,
        lens_tvd.transpose("delivery", "probe", "turn", "layer").values,
    )
    xr.testing.assert_identical(ds.bl.summary(decoders=False), s)


def test_oracle_labels_and_position_bias() -> None:
    ds = synthetic()
    assert ds.bl.oracle().dims == (*INSTANCE, "outcome")
    assert np.allclose(ds.bl.oracle().values[..., :2], [0.3, 0.7])
    assert ds.bl.labels().values.tolist() == [["a", "b"]]
    assert "rotation_tvd_mean" in ds.bl.position_bias()


def test_decoders_return_scores_per_layer() -> None:
    ds = synthetic()
    got = ds.bl.decoders(n_folds=2, max_iter=20)
    assert dict(got.sizes) == {"layer": N_LAYER}
    assert {"score", "control_score", "selectivity"} <= set(got.data_vars)
    with pytest.raises(BeliefLensError, match="not in this file"):
        ds.bl.decoders(probe="missing")


def test_accessor_on_a_tiny_model_file(tiny_model: LoadedModel, tmp_path: Path) -> None:
    """On an extracted file, the logit lens at the last layer reproduces the output belief."""
    import belieflens
    import belieflens.envs as envs
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    path = write_cache(envs.get("coin-flip", turns=2), tiny_model, tmp_path / "c.h5",
                   ExtractOptions(episodes=1))
    ds = belieflens.open_cache(path)
    out = ds.bl.beliefs()
    last = ds.bl.beliefs(source="logit-lens").isel(layer=-1)
    np.testing.assert_allclose(last.values, out.values, atol=1e-3)
    assert ds.bl.divergence("tvd").dims == INSTANCE
    ds.close()


@pytest.mark.real_model
def test_accessor_on_the_real_model(smol_model: LoadedModel, tmp_path: Path) -> None:
    """SmolLM2: the last logit-lens layer reproduces the output belief; TVDs are in [0, 1]."""
    import belieflens
    import belieflens.envs as envs
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    path = write_cache(envs.get("coin-flip", turns=1, bins=3), smol_model, tmp_path / "c.h5",
                   ExtractOptions(episodes=1))
    ds = belieflens.open_cache(path)
    last = ds.bl.beliefs(source="logit-lens").isel(layer=-1)
    np.testing.assert_allclose(last.values, ds.bl.beliefs().values, atol=2e-3)
    tvd = ds.bl.divergence("tvd", source="logit-lens")
    assert tvd.dims == (*INSTANCE, "layer")
    ok = tvd.values[np.isfinite(tvd.values)]
    assert ok.size and (ok >= 0).all() and (ok <= 1).all()
    ds.close()
