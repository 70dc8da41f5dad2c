"""summary(), position bias, calibration and the report on a tiny-model file written in many
batches: chunked results equal in-memory results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import belieflens
import belieflens.analysis as analysis
import belieflens.envs as envs
from belieflens.analysis.beliefs import lens_beliefs
from belieflens.analysis.calibration import reliability
from belieflens.analysis.position_bias import position_bias
from belieflens.api import analyze
from belieflens.lens.tuned import TunedLensConfig, identity_lens
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache


@pytest.fixture(scope="module")
def batched_file(tiny_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = envs.get("coin-flip", turns=2, bins=3)
    out = tmp_path_factory.mktemp("summary") / "coin.h5"
    # window=7: the file is written in many small batches (queries are not a multiple of 7)
    return write_cache(env, tiny_model, out, ExtractOptions(episodes=4, window=7, max_rows=4))


def _lens_for(ds: xr.Dataset) -> Any:
    cfg = TunedLensConfig(model_id="tiny-random", revision="unknown",
                          weights_hash=str(ds.attrs["weights_hash"]), unembed_hash="x",
                          n_layers=ds.sizes["layer"], d_model=ds.sizes["d_model"],
                          vocab_size=0)
    return identity_lens(cfg)


def _close(a: xr.DataArray, b: xr.DataArray, atol: float = 1e-9) -> bool:
    x, y = xr.broadcast(a, b)
    return bool(np.allclose(x.values, y.values, atol=atol, equal_nan=True))


def test_summary_shape_sources_and_semantics(batched_file: Path) -> None:
    ds = belieflens.open_cache(batched_file)
    s = analysis.summary(ds, _lens_for(ds), chunk=5)
    assert s["tvd_mean"].dims == ("delivery", "probe", "turn", "layer", "source")
    assert list(s["source"].values) == ["output", "logit-lens", "tuned-lens", "decoder"]
    tv = s["tvd_mean"]
    # output repeated over layers; logit lens at the last layer equals the output
    out = tv.sel(source="output")
    assert _close(out, out.isel(layer=0))
    assert _close(tv.sel(source="logit-lens").isel(layer=-1), out.isel(layer=-1), atol=1e-4)
    # an identity tuned lens is the logit lens
    assert _close(tv.sel(source="tuned-lens"), tv.sel(source="logit-lens"))
    decoder = tv.sel(source="decoder")
    has = s["n"].sel(source="output") > 0
    assert bool(np.isfinite(decoder.where(has)).sum() == has.sum())
    assert float(decoder.min()) >= 0 and float(decoder.max()) <= 1
    assert ((s["n"] == 4) | (s["n"] == 0)).all() and int(s["n"].max()) == 4
    assert np.all(s["tvd_sem"].values[np.isfinite(s["tvd_sem"].values)] >= 0)
    no = analysis.summary(ds, decoders=False)
    assert no["tvd_mean"].sel(source=["tuned-lens", "decoder"]).isnull().all()
    ds.close()


def test_chunked_equals_in_memory(batched_file: Path) -> None:
    ds = belieflens.open_cache(batched_file)
    assert ds["resid"].variable._in_memory is False  # lazily indexed, not loaded
    chunked = analysis.summary(ds, chunk=3, seed=1)
    mem = ds.load()
    whole = analysis.summary(mem, chunk=10**6, seed=1)
    xr.testing.assert_allclose(chunked, whole, rtol=1e-9, atol=1e-12)
    a = lens_beliefs(belieflens.open_cache(batched_file), chunk=2)
    xr.testing.assert_allclose(a, lens_beliefs(mem, chunk=10**6), rtol=1e-9, atol=1e-12)
    ds.close()


def test_position_bias_and_calibration_on_file(batched_file: Path) -> None:
    ds = belieflens.open_cache(batched_file)
    pb = position_bias(ds)
    rt = pb["rotation_tvd_mean"].values
    assert np.all(rt[np.isfinite(rt)] >= 0) and np.all(rt[np.isfinite(rt)] <= 1)
    # excess probabilities over a probe's K positions sum to 0 per read-out
    pe = pb["position_excess_mean"].sum("option", skipna=True)
    assert np.allclose(pe, 0.0, atol=1e-9)
    rel = reliability(analysis.output_beliefs(ds))
    assert "all" in rel["probe"].values and float(rel["count"].sel(probe="all").sum()) > 0
    ds.close()


def _mcq(bias: float, k: int = 3) -> xr.Dataset:
    """One probe instance per episode, asked under k rotations, with belief q and an additive
    log-prob bonus ``bias`` for position 0."""
    from belieflens.episodes.latin import latin_square

    q = np.array([0.6, 0.3, 0.1])
    sq = latin_square(k)
    rows = []
    for r in range(k):
        lp = np.log(q[sq[r]])
        lp[0] += bias
        rows.append(lp)
    n = 2 * k
    lp = np.array(rows * 2)
    return xr.Dataset(
        {
            "option_logprob": (("query", "option"), lp),
            "outcome": (("query", "option"), np.concatenate([sq, sq])),
            "n_outcome": (("query",), np.full(n, k)),
            "oracle": (("query", "outcome"), np.tile(q, (n, 1))),
            "outcome_label": (("query", "outcome"), np.array([["a", "b", "c"]] * n)),
        },
        coords={"episode": ("query", np.repeat([0, 1], k)), "turn": ("query", np.zeros(n)),
                "rotation": ("query", np.tile(np.arange(k), 2)),
                "probe": ("query", ["p"] * n), "delivery": ("query", ["single-turn"] * n)},
    )


def test_position_bias_finds_a_planted_slot_preference() -> None:
    clean = position_bias(_mcq(0.0))
    assert np.allclose(clean["rotation_tvd_mean"], 0.0, atol=1e-12)
    assert np.allclose(clean["position_excess_mean"], 0.0, atol=1e-12)
    biased = position_bias(_mcq(1.5))
    pe = biased["position_excess_mean"].sel(delivery="single-turn", probe="p").values
    assert pe[0] > 0.1 and pe[1] < 0 and pe[2] < 0
    assert float(biased["rotation_tvd_mean"].min()) > 0.05


def test_reliability_is_zero_at_the_oracle_and_positive_when_overconfident() -> None:
    ds = _mcq(0.0)
    b = analysis.output_beliefs(ds)
    assert float(reliability(b)["ece"].sel(probe="all")) == pytest.approx(0.0, abs=1e-9)
    sharp = b["belief"] ** 3
    b2 = b.assign(belief=sharp / sharp.sum("outcome"))
    rel = reliability(b2)
    assert float(rel["ece"].sel(probe="all")) > 0.05
    top = rel.sel(probe="all").dropna("bin")
    assert float(top["predicted"][-1]) > float(top["oracle"][-1])  # over-confident at the top


def test_report_embeds_every_figure(batched_file: Path, tmp_path: Path) -> None:
    res = analyze(batched_file, tmp_path / "rep", decoders=False)
    md = (tmp_path / "rep" / "report.md").read_text()
    pngs = [f for f in res.files if f.suffix == ".png"]
    assert len(pngs) >= 6
    for f in pngs:
        assert f.exists() and f.stat().st_size > 1000
        assert f"]({f.name})" in md
    for heading in ("How to read this", "Each read-out per layer", "Position bias", "Calibration"):
        assert heading in md
    assert "output TVD to oracle" in res.headline and "logit-lens" in res.headline


def test_mean_abs_sees_what_binned_ece_misses() -> None:
    b = analysis.output_beliefs(_mcq(0.0))
    flat = b.assign(belief=xr.full_like(b["belief"], 1 / 3))
    rel = reliability(flat)
    assert float(rel["ece"].sel(probe="all")) == pytest.approx(0.0, abs=1e-9)
    assert float(rel["mean_abs"].sel(probe="all")) == pytest.approx((0.6 - 1 / 3 + 1 / 3 - 0.3
                                                                     + 1 / 3 - 0.1) / 3)


def test_decoder_tvd_fits_a_question_asked_over_sets_of_different_sizes() -> None:
    """One probe name whose instances have 2 or 3 outcomes (dice of different sizes under one
    question) is fitted per outcome count, not refused for the NaN past the smaller K."""
    from belieflens.analysis.summary import decoder_tvd
    from tests.analysis.synthetic_cache import cache_dataset, mcq_rows

    rng = np.random.default_rng(0)
    rows = []
    for ep in range(6):
        for turn, k in ((0, 2), (1, 3)):
            p = rng.dirichlet(np.ones(k))
            rows += mcq_rows(p, episode=ep, turn=turn, probe="revealed", oracle=p,
                             labels=[str(i) for i in range(k)])
    ds = cache_dataset(rows)
    ds["resid"] = (("query", "layer", "d_model"), rng.normal(size=(len(rows), 2, 4)))
    out = decoder_tvd(ds, np.random.default_rng(1), n_folds=3)
    assert out.dims == ("delivery", "probe", "episode", "turn", "layer")
    vals = out.sel(delivery="single-turn", probe="revealed").values
    assert np.isfinite(vals).all() and (vals >= 0).all() and (vals <= 1).all()


def test_decoder_tvd_on_dask_backed_residuals_equals_the_in_memory_fit() -> None:
    """A dask-backed study (a study directory) is fitted one dask task per layer group; the
    held-out TVDs equal those of the block-by-block path, groups split by a small budget."""
    from belieflens.analysis.summary import decoder_tvd
    from tests.analysis.synthetic_cache import cache_dataset, mcq_rows

    rng = np.random.default_rng(3)
    rows = []
    for ep in range(6):
        for turn in range(3):
            p = rng.dirichlet(np.ones(2))
            rows += mcq_rows(p, episode=ep, turn=turn, probe="next", oracle=p, labels=["a", "b"])
    ds = cache_dataset(rows)
    ds["resid"] = (("query", "layer", "d_model"), rng.normal(size=(len(rows), 5, 4)))
    budget = len(rows) * 4 * 8 * 2  # two layers per group: groups of 2, 2 and 1
    local = decoder_tvd(ds, np.random.default_rng(1), n_folds=3, memory_budget=budget)
    lazy = decoder_tvd(ds.chunk({"query": 7}), np.random.default_rng(1), n_folds=3,
                     memory_budget=budget)
    assert np.isfinite(local.values).any()
    np.testing.assert_array_equal(local.values, lazy.values)


def test_report_fits_decoders_first_with_summarys_own_result(
    batched_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the report runs the decoder fits before the other stages and hands them to summary:
    # its summary is the one summary() computes on its own
    import belieflens.analysis.results as report

    seen: list[xr.Dataset] = []

    def keep(*a: Any, **k: Any) -> xr.Dataset:
        seen.append(analysis.summary(*a, **k))
        return seen[-1]

    monkeypatch.setattr(report, "summary", keep)
    seed = 3
    analyze(batched_file, decoders=True, seed=seed)
    with belieflens.open_cache(batched_file) as ds:
        alone = analysis.summary(ds, decoders=True, seed=seed)
        other = analysis.summary(ds, decoders=True, seed=seed + 1)
    assert np.isfinite(alone["tvd_mean"].sel(source="decoder")).any()
    xr.testing.assert_identical(seen[0], alone)
    assert not other.identical(alone)  # the decoders' folds follow the seed
