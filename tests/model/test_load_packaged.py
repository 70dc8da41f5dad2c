"""The packaged models (optional extras, ``make model-NAME``) through the same bridge path as
the default model: stored residuals equal a plain transformers forward, the final norm is
the model's own (Gemma's ``1 + w`` included), and the last lens layer reproduces the option
log-probs. Each model is skipped, with the reason, when its packages are not installed
(CI installs none of them); run ``pytest -rs`` to see the reasons.

``qwen2.5-coder-1.5b`` is skipped too where less than 14 GB of memory is available: it and
a plain transformers copy take about 12 GB.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import belieflens
import belieflens.envs as envs
from belieflens.lens.apply import final_norm_of, lens_logits
from belieflens.model.load import LoadedModel, catalogue
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache

pytestmark = pytest.mark.real_model

INSTALLED = {m.name: m.installed for m in catalogue()}
NAMES = ("qwen2.5-coder-0.5b", "gemma3-270m", "qwen2.5-coder-1.5b")
NEEDS_GB = {"qwen2.5-coder-1.5b": 14.0}
"""Memory a model's tests need available (the bridge, its file and a plain copy)."""


def _available_gb() -> float:
    """MemAvailable of /proc/meminfo in GB (infinite where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return float("inf")


@pytest.fixture(scope="module", params=NAMES)
def packaged(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoadedModel, Path]]:
    """(model, a coin-flip file of 2 episodes × 2 turns from it), one model at a time."""
    name = str(request.param)
    if not INSTALLED[name]:
        pytest.skip(f"{name} is not installed (`make model-{name}` installs it; CI does not)")
    need, have = NEEDS_GB.get(name, 0.0), _available_gb()
    if have < need:
        pytest.skip(f"{name} needs {need:.0f} GB of available memory, {have:.1f} GB is")
    model = belieflens.load(name)
    env = envs.get("coin-flip", turns=2, delivery="multi-turn")
    path = write_cache(env, model, tmp_path_factory.mktemp(name) / "coin.h5",
                   ExtractOptions(episodes=2, max_rows=8))
    yield model, path
    del model


def test_model_info(packaged: tuple[LoadedModel, Path]) -> None:
    model, _ = packaged
    em = {m.name: m for m in catalogue()}[model.info.spec]
    assert model.info.n_layers == em.layers and model.info.source == "embedded"
    assert model.info.weights_hash == belieflens.model.load.EMBEDDED[model.info.spec].sha256
    assert model.info.chat_template_hash


def test_resid_equals_plain_transformers_forward(packaged: tuple[LoadedModel, Path]) -> None:
    from transformers import AutoModelForCausalLM

    model, path = packaged
    plain = AutoModelForCausalLM.from_pretrained(model.info.weights_cache, dtype=torch.float32)
    plain.eval()  # type: ignore[no-untyped-call]  # transformers' PreTrainedModel.eval is unannotated
    ds = belieflens.open_cache(path)
    norm = final_norm_of(ds)
    try:
        for q in (0, ds.sizes["query"] - 1):
            row = ds.isel(query=q)
            raw = row["input_ids"].values
            ids = torch.from_numpy(raw[raw >= 0].astype(np.int64))[None]
            pos = int(row["answer_pos"])
            with torch.inference_mode():
                hs = plain(ids, output_hidden_states=True).hidden_states
            resid = row["resid"].values
            n = resid.shape[0] - 1
            for layer in range(n):  # embeddings (Gemma's scaled ones) and block outputs
                ref = hs[layer][0, pos].numpy()
                assert np.abs(resid[layer] - ref).max() <= 1e-3 * max(1.0, np.abs(ref).max())
            # transformers' last hidden state is after the final norm (Gemma: x̂ · (1 + w)),
            # ours is before it: the stored norm must turn one into the other
            ref = hs[n][0, pos].numpy()
            assert np.abs(norm.apply(resid[n]) - ref).max() <= 1e-3 * max(1.0, np.abs(ref).max())
    finally:
        ds.close()
        del plain


def test_last_lens_layer_reproduces_option_logprobs(packaged: tuple[LoadedModel, Path]) -> None:
    _, path = packaged
    ds = belieflens.open_cache(path)
    try:
        logits = lens_logits(ds).isel(layer=-1).values
        stored = ds["option_logprob"].values
        mask = np.isfinite(stored)
        diff = (logits - ds["answer_lse"].values[:, None])[mask] - stored[mask]
        assert np.abs(diff).max() < 2e-3
    finally:
        ds.close()
