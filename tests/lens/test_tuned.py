"""The tuned lens as analysis uses it (no model): a Lens, numpy and torch alike, file checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

from belieflens.lens import (
    Lens,
    LogitLens,
    TunedLens,
    TunedLensConfig,
    TunedLensError,
    identity_lens,
    parse_lens_spec,
)

N_LAYER, D = 3, 4


def _lens(seed: int = 0) -> TunedLens:
    rng = np.random.default_rng(seed)
    cfg = TunedLensConfig(model_id="m", revision="r", weights_hash="a" * 64,
                          unembed_hash="b" * 64, n_layers=N_LAYER, d_model=D, vocab_size=7)
    w = rng.normal(size=(N_LAYER, D, D)).astype(np.float32) * 0.1
    b = rng.normal(size=(N_LAYER, D)).astype(np.float32)
    w[-1], b[-1] = 0.0, 0.0
    return TunedLens(cfg, w, b)


def test_tuned_and_logit_lens_are_lenses() -> None:
    lens = _lens()
    assert isinstance(lens, Lens) and isinstance(LogitLens(), Lens)
    assert lens.name == "tuned-lens" and LogitLens().name == "logit-lens"
    h = np.random.default_rng(1).normal(size=(5, N_LAYER, D))
    assert LogitLens().transform(h) is h
    assert np.array_equal(lens(h), lens.transform(h))
    assert np.array_equal(identity_lens(lens.config).transform(h), h)


def test_transform_is_one_formula_for_numpy_and_torch() -> None:
    lens = _lens()
    h = np.random.default_rng(2).normal(size=(5, N_LAYER, D))
    got = lens.transform(torch.as_tensor(h))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert np.allclose(got.numpy(), lens.transform(h), rtol=1e-12, atol=1e-12)
    with pytest.raises(TunedLensError, match="do not fit this lens"):
        lens.transform(np.zeros((2, N_LAYER + 1, D)))


def test_wrong_cache_file_is_refused() -> None:
    lens = _lens()
    ds = xr.Dataset({"resid": (("query", "layer", "d_model"), np.zeros((1, N_LAYER, D)))},
                    attrs={"weights_hash": "f" * 64, "model_id": "someone-else"})
    with pytest.raises(TunedLensError, match="does not fit this cache file"):
        lens.check_file(ds)
    ds.attrs["weights_hash"] = lens.config.weights_hash
    lens.check_file(ds)  # the right model passes
    LogitLens().check_file(ds)


@pytest.mark.parametrize("spec", ["logit", "tuned:", "tuned", "tunedX:/a"])
def test_bad_lens_spec(spec: str) -> None:
    with pytest.raises(TunedLensError, match="'--lens'"):
        parse_lens_spec(spec)
    assert parse_lens_spec("tuned:/x/y") == Path("/x/y")
