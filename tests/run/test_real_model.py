"""The real embedded model (SmolLM2-135M-Instruct): loaded once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import belieflens
import belieflens.envs as envs
from belieflens.lens.apply import final_norm_of, lens_logits
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def small_file(smol_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = envs.get("coin-flip", turns=2)
    return write_cache(env, smol_model, tmp_path_factory.mktemp("real") / "coin.h5",
                   ExtractOptions(episodes=1, max_rows=8))


def test_model_info(smol_model: LoadedModel) -> None:
    info = smol_model.info
    assert info.n_layers == 30 and info.d_model == 576 and info.vocab_size == 49152
    assert len(info.weights_hash) == 64 and info.chat_template_hash


def test_resid_equals_plain_transformers_hidden_states(
    smol_model: LoadedModel, small_file: Path
) -> None:
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(smol_model.info.weights_cache,
                                                 dtype=torch.float32)
    plain.eval()  # type: ignore[no-untyped-call]  # transformers' PreTrainedModel.eval is unannotated
    ds = belieflens.open_cache(small_file)
    norm = final_norm_of(ds)
    for q in (0, ds.sizes["query"] - 1):
        row = ds.isel(query=q)
        ids = row["input_ids"].values
        ids = ids[ids >= 0]
        pos = int(row["answer_pos"])
        with torch.inference_mode():
            hs = plain(torch.tensor([ids]), output_hidden_states=True).hidden_states
        resid = row["resid"].values
        n = resid.shape[0] - 1
        for layer in range(n):  # embeddings and block outputs before the last
            ref = hs[layer][0, pos].numpy()
            assert np.abs(resid[layer] - ref).max() <= 1e-3 * max(1.0, np.abs(ref).max())
        # transformers' last hidden state is after the final norm; ours is before it
        assert np.allclose(norm.apply(resid[n]), hs[n][0, pos].numpy(), atol=1e-3)
    ds.close()


def test_last_lens_layer_reproduces_option_logprobs(small_file: Path) -> None:
    ds = belieflens.open_cache(small_file)
    logits = lens_logits(ds).isel(layer=-1).values  # [query, option]
    lse = ds["answer_lse"].values[:, None]
    stored = ds["option_logprob"].values
    mask = np.isfinite(stored)
    assert np.abs((logits - lse)[mask] - stored[mask]).max() < 2e-3
    ds.close()


def test_beliefs_are_distributions(small_file: Path) -> None:
    from belieflens.analysis.beliefs import output_beliefs

    ds = belieflens.open_cache(small_file)
    b = output_beliefs(ds)
    s = b["belief"].sum("outcome", skipna=True)
    assert np.allclose(s.values[np.isfinite(b["belief"].isel(outcome=0).values)], 1.0)
    ds.close()
