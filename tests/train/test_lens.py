"""Training a tuned lens on the tiny random model: it lowers held-out KL; provenance checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from belieflens.lens import (
    Head,
    TunedLensError,
    identity_lens,
    load_tuned_lens,
    save_tuned_lens,
)
from belieflens.model.load import LoadedModel
from belieflens.train.lens import TrainOptions, TrainResult, kl_per_layer, train_tuned_lens
from belieflens.train.lens_data import collect_positions


@pytest.fixture(scope="module")
def trained(tiny_model: LoadedModel) -> TrainResult:
    rng = np.random.default_rng(0)
    pos = collect_positions(tiny_model, rng, envs=("coin-flip", "dice"), episodes=1,
                            max_contexts=24, per_context=16)
    return train_tuned_lens(tiny_model, pos, rng, TrainOptions(epochs=6, batch_size=128,
                                                                lr=3e-3, heldout=0.25))


def test_positions_are_distinct_and_cover_every_layer(tiny_model: LoadedModel) -> None:
    pos = collect_positions(tiny_model, np.random.default_rng(1), envs=("coin-flip",),
                            episodes=1, max_contexts=4, per_context=8)
    n_layer = tiny_model.info.n_layers + 1
    assert pos.resid.shape[1:] == (n_layer, tiny_model.info.d_model)
    assert pos.resid.shape[0] <= 4 * 8 and pos.n_contexts == 4
    assert np.isfinite(pos.resid).all()
    # identical token prefixes are kept once: no two rows share a whole residual column
    flat = pos.resid.reshape(pos.resid.shape[0], -1)
    assert len(np.unique(flat, axis=0)) == flat.shape[0]


def test_tuned_lens_beats_logit_lens_on_heldout_positions(trained: TrainResult) -> None:
    kl_logit, kl_tuned = trained.kl_logit, trained.kl_tuned
    assert kl_logit[-1] == pytest.approx(0.0, abs=1e-6)  # last layer: the model's output
    assert kl_tuned[-1] == pytest.approx(0.0, abs=1e-6)
    assert kl_logit[:-1].sum() > 0.01
    assert kl_tuned[:-1].sum() < 0.7 * kl_logit[:-1].sum()
    assert trained.n_heldout > 0 and trained.n_train > trained.n_heldout


def test_identity_lens_is_the_logit_lens(tiny_model: LoadedModel, trained: TrainResult) -> None:
    head = Head.from_model(tiny_model)
    rng = np.random.default_rng(2)
    pos = collect_positions(tiny_model, rng, envs=("coins",), episodes=1, max_contexts=3,
                            per_context=6)
    ident = identity_lens(trained.lens.config)
    assert np.allclose(kl_per_layer(pos.resid, head, ident), kl_per_layer(pos.resid, head))
    assert np.allclose(ident(pos.resid), pos.resid)


def test_save_load_roundtrip_and_wrong_model(tiny_model: LoadedModel, trained: TrainResult,
                                             tmp_path: Path) -> None:
    folder = save_tuned_lens(trained.lens, tmp_path / "lens")
    back = load_tuned_lens(folder, model=tiny_model)
    assert np.array_equal(back.weight, trained.lens.weight)
    assert back.config.unembed_hash == trained.lens.config.unembed_hash
    assert len(back.config.unembed_hash) == 64
    assert back.config.metrics["heldout_kl_tuned_lens"][0] < (
        back.config.metrics["heldout_kl_logit_lens"][0] + 1e-9
    )
    other = dataclasses.replace(trained.lens.config, unembed_hash="0" * 64)
    wrong = dataclasses.replace(trained.lens, config=other)
    save_tuned_lens(wrong, tmp_path / "wrong")
    with pytest.raises(TunedLensError, match="unembedding hash"):
        load_tuned_lens(tmp_path / "wrong", model=tiny_model)
    with pytest.raises(TunedLensError, match="lacks"):
        load_tuned_lens(tmp_path / "nothing-here")


def test_wrong_cache_file_is_refused(trained: TrainResult) -> None:
    n, d = trained.lens.config.n_layers, trained.lens.config.d_model
    ds = xr.Dataset({"resid": (("query", "layer", "d_model"), np.zeros((1, n, d)))},
                    attrs={"weights_hash": "f" * 64, "model_id": "someone-else"})
    with pytest.raises(TunedLensError, match="does not fit this cache file"):
        trained.lens.check_file(ds)
    ds.attrs["weights_hash"] = trained.lens.config.weights_hash
    trained.lens.check_file(ds)  # the right model passes
