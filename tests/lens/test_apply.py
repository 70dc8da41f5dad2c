"""The multi-token lens on a synthetic cache Dataset: whole continuations vs the first token."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import xarray as xr

from belieflens.analysis.beliefs import lens_beliefs
from belieflens.episodes.latin import latin_square
from belieflens.lens import Lens, LogitLens
from belieflens.lens.apply import has_continuations, lens_logits, lens_option_logprob

if TYPE_CHECKING:
    from belieflens.model.load import LoadedModel

N_LAYER, D, N_TOK = 3, 6, 7
# two 2-option probes x 2 rotations; option 0 has 3 tokens, option 1 has 2 tokens
CONT = [(1, 4, 2), (3, 5)]


def synthetic(seed: int = 0, *, cont: bool = True) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    n_q = 4
    k = 2
    square = latin_square(k)
    index = np.full((n_q, k, 3), -1, dtype=np.int32)
    outcome = np.zeros((n_q, k), dtype=np.int32)
    rotation = np.array([0, 1, 0, 1])
    for q in range(n_q):
        outcome[q] = square[rotation[q]]
        for j in range(k):
            toks = CONT[outcome[q, j]]  # each outcome keeps its token sequence
            index[q, j, : len(toks)] = toks
    data = {
        "resid": (("query", "layer", "d_model"), rng.normal(size=(n_q, N_LAYER, D))),
        "option_lens_index": (("query", "option", "cont_token"), index),
        "outcome": (("query", "option"), outcome),
        "option_logprob": (("query", "option"), rng.normal(size=(n_q, k))),
        "oracle": (("query", "outcome"), np.tile([0.3, 0.7], (n_q, 1))),
        "outcome_label": (("query", "outcome"), np.array([["a", "b"]] * n_q)),
        "n_outcome": (("query",), np.full(n_q, k, dtype=np.int32)),
        "unembed": (("lens_token", "d_model"), rng.normal(size=(N_TOK, D))),
        "unembed_bias": (("lens_token",), rng.normal(size=N_TOK)),
        "final_norm_gain": (("d_model",), rng.uniform(0.5, 2.0, size=D)),
        "final_norm_bias": (("d_model",), np.zeros(D)),
    }
    if cont:
        cr = rng.normal(size=(n_q, k, 2, N_LAYER, D))
        cr[index[:, :, 2] < 0, 1] = np.nan  # the 2-token option has one later position
        data["cont_resid"] = (("query", "option", "cont_extra", "layer", "d_model"), cr)
    coords = {
        "episode": ("query", [0, 0, 1, 1]),
        "turn": ("query", [0, 0, 0, 0]),
        "rotation": ("query", rotation),
        "probe": ("query", ["p"] * n_q),
        "delivery": ("query", ["single-turn"] * n_q),
    }
    return xr.Dataset(data, coords=coords, attrs={"final_norm_kind": "rms",
                                                   "final_norm_eps": 1e-6})


def _logp(h: np.ndarray, ds: xr.Dataset) -> np.ndarray:
    g = ds["final_norm_gain"].values
    x = h / np.sqrt(np.mean(h * h) + 1e-6) * g
    z = ds["unembed"].values @ x + ds["unembed_bias"].values
    return np.asarray(z - np.log(np.exp(z - z.max()).sum()) - z.max())


def test_whole_continuation_is_the_sum_of_token_terms() -> None:
    ds = synthetic()
    got = lens_option_logprob(ds)
    idx = ds["option_lens_index"].values
    for q in range(4):
        for layer in range(N_LAYER):
            for j in range(2):
                toks = [t for t in idx[q, j] if t >= 0]
                want = _logp(ds["resid"].values[q, layer], ds)[toks[0]]
                for i, t in enumerate(toks[1:]):
                    want += _logp(ds["cont_resid"].values[q, j, i, layer], ds)[t]
                assert got[q, layer, j] == pytest.approx(want, abs=1e-10)


def test_fallback_without_cont_resid_is_first_token() -> None:
    ds = synthetic(cont=False)
    assert not has_continuations(ds)
    got = lens_option_logprob(ds)
    logits = lens_logits(ds)
    # first-token log-probs differ from logits by one normaliser per (query, layer)
    diff = got - logits
    assert np.allclose(diff, diff[..., :1])
    whole = lens_option_logprob(synthetic(), multi_token="auto")
    assert not np.allclose(whole, got)  # later tokens change the scores
    assert np.allclose(lens_option_logprob(synthetic(), multi_token="first-token"), got)


def test_lens_beliefs_are_debiased_distributions_and_record_the_mode() -> None:
    whole = lens_beliefs(synthetic())
    first = lens_beliefs(synthetic(cont=False))
    assert whole.attrs["multi_token"] == "continuation"
    assert first.attrs["multi_token"] == "first-token"
    assert whole.dims == ("delivery", "probe", "episode", "turn", "layer", "outcome")
    assert np.allclose(whole.sum("outcome"), 1.0)
    assert not np.allclose(whole.values, first.values)


class _ShiftCont:
    """A lens that only shifts continuation-shaped inputs (4-D): later terms change only."""

    name = "shift-lens"

    def transform(self, h: Any) -> Any:
        return np.asarray(h + (1.0 if h.ndim == 4 else 0.0))

    def check_file(self, ds: xr.Dataset) -> None:
        pass


def test_lens_transform_is_applied_to_both_positions() -> None:
    ds = synthetic()
    base = lens_option_logprob(ds)
    same = lens_option_logprob(ds, lens=LogitLens())
    assert np.array_equal(base, same)
    assert isinstance(_ShiftCont(), Lens)
    moved = lens_option_logprob(ds, lens=_ShiftCont())
    assert not np.allclose(base, moved)
    assert lens_beliefs(ds, lens=_ShiftCont()).attrs["lens"] == "shift"


def test_lens_arrays_have_named_dims_and_query_coords() -> None:
    ds = synthetic()
    for got in (lens_logits(ds), lens_option_logprob(ds)):
        assert isinstance(got, xr.DataArray)
        assert got.dims == ("query", "layer", "option")
        for name in ("episode", "turn", "rotation", "probe", "delivery"):
            assert np.array_equal(got[name].values, ds[name].values)


def test_chunked_equals_whole() -> None:
    ds = synthetic()
    assert np.allclose(lens_option_logprob(ds, chunk=1, memory_budget=1),
                       lens_option_logprob(ds, chunk=100))


@pytest.mark.parametrize("cont", [True, False])
def test_dask_backed_blocks_equal_the_in_memory_scores(cont: bool) -> None:
    """A dask-backed dataset is scored chunk by chunk (apply_ufunc, dask="parallelized"):
    the same numbers as the in-memory loop, and nothing is computed until asked."""
    ds = synthetic(cont=cont)
    lazy = ds.chunk({"query": 3})  # uneven chunks: 3 + 1 read-outs
    assert lazy["resid"].chunks is not None
    want = lens_option_logprob(ds)
    got = lens_option_logprob(lazy)
    assert np.allclose(got.values, want.values, equal_nan=True)
    assert np.array_equal(np.isnan(got.values), np.isnan(want.values))
    assert np.allclose(lens_beliefs(lazy).values, lens_beliefs(ds).values, equal_nan=True)


def test_cont_resid_convention_on_tiny_model(tiny_model: LoadedModel, tmp_path: Path) -> None:
    """Each stored continuation residual, read through the lens head at the last layer, gives
    the model's own logit of the next continuation token (the convention the lens relies on)."""
    import torch

    import belieflens
    import belieflens.envs as envs
    from belieflens.lens.apply import final_norm_of
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    model = tiny_model
    path = write_cache(envs.get("dice"), model, Path(str(tmp_path)) / "dice.h5",
                   ExtractOptions(episodes=1, cont_resid=True))
    ds = belieflens.open_cache(path)
    assert has_continuations(ds)
    norm = final_norm_of(ds)
    w, b = ds["unembed"].values, ds["unembed_bias"].values
    index = ds["option_lens_index"].values
    checked = 0
    for q in range(min(3, ds.sizes["query"])):
        ctx = [int(t) for t in ds["input_ids"].values[q] if t >= 0]
        for j in range(ds.sizes["option"]):
            cont = [int(t) for t in ds["option_ids"].values[q, j] if t >= 0]
            if len(cont) < 2:
                continue
            with torch.inference_mode():
                logits = model.bridge(torch.tensor([ctx + cont[:-1]]))[0]
            for i in range(len(cont) - 1):
                h = ds["cont_resid"].values[q, j, i, -1]
                lens_logit = w[index[q, j, i + 1]] @ norm.apply(h) + b[index[q, j, i + 1]]
                model_logit = float(logits[len(ctx) + i, cont[i + 1]])
                assert lens_logit == pytest.approx(model_logit, abs=1e-3 * max(1, abs(model_logit)))
                checked += 1
    assert checked > 0
    whole = lens_beliefs(ds)
    assert whole.attrs["multi_token"] == "continuation"
    assert np.allclose(whole.sum("outcome", skipna=True).values[
        np.isfinite(whole.isel(outcome=0).values)], 1.0)
    ds.close()
