"""Shared fixtures: the embedded tokenizer, a tiny random model, the real embedded model.

Heavy fixtures are session-scoped: the real model loads once per test session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import xarray as xr
from hypothesis import settings

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

    from belieflens.model.load import LoadedModel, ModelSource

# Property tests have no per-example deadline: the suite's workers share two cores, so an
# example's wall time says more about the other worker than about the code.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that loads the real embedded model ``real_model``, so that
    ``make test-fast`` (``-m "not real_model"``) skips exactly those."""
    for item in items:
        if "smol_model" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_model)


@pytest.fixture(scope="session", autouse=True)
def _threads() -> Iterator[None]:
    import torch

    # two cores shared by the pytest-xdist workers (PYTEST_XDIST_WORKER_COUNT, set by xdist)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    torch.set_num_threads(max(1, 2 // workers))
    yield


@pytest.fixture(scope="session")
def smol_source() -> ModelSource:
    from belieflens.model.load import resolve

    return resolve("smollm2-135m")


@pytest.fixture(scope="session")
def smol_tokenizer(smol_source: ModelSource) -> PreTrainedTokenizerBase:
    """The embedded model's tokenizer, read from its GGUF (or the dequantised cache)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smol_source.path, gguf_file=smol_source.gguf_file)


def tiny_llama(tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> LlamaForCausalLM:
    """A 2-layer random Llama with the embedded tokenizer's vocabulary (no download)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.eval()  # type: ignore[no-untyped-call]  # transformers' PreTrainedModel.eval is unannotated
    # random init gives tiny logits; scale up so beliefs are not all uniform
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(50.0)
    return model


def tiny_gemma(tokenizer: PreTrainedTokenizerBase, seed: int = 0, window: int = 4) -> Any:
    """A 3-layer random Gemma 3 with the embedded tokenizer's vocabulary (no download): its
    first and last layers slide over ``window`` positions, its final logits are soft-capped."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=window,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        final_logit_softcapping=5.0, max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = Gemma3ForCausalLM(cfg)
    model.eval()  # type: ignore[no-untyped-call]  # as in tiny_llama
    with torch.no_grad():  # as tiny_llama: beliefs not all uniform
        model.model.embed_tokens.weight.mul_(5.0)
    return model


@pytest.fixture(scope="session")
def tiny_model(smol_tokenizer: PreTrainedTokenizerBase) -> LoadedModel:
    """A LoadedModel wrapping a tiny random Llama through the TransformerBridge."""
    return _bridged("tiny-random", tiny_llama(smol_tokenizer), smol_tokenizer)


@pytest.fixture(scope="session")
def tiny_gemma_model(smol_tokenizer: PreTrainedTokenizerBase) -> LoadedModel:
    """A LoadedModel wrapping :func:`tiny_gemma` (layers sliding over 4 positions) through
    the TransformerBridge."""
    return _bridged("tiny-gemma", tiny_gemma(smol_tokenizer), smol_tokenizer)


def _bridged(name: str, hf: Any, tokenizer: PreTrainedTokenizerBase) -> LoadedModel:
    """The random HF model ``hf`` as a LoadedModel named ``name`` (CPU, float32)."""
    from belieflens.model.load import ModelSource, bridge_from_hf

    src = ModelSource(name, "directory", Path("."), name)
    return bridge_from_hf(src, "cpu", "float32", hf, tokenizer, "random", "", 0.0)


@pytest.fixture(scope="session")
def smol_model() -> LoadedModel:
    """The real embedded model (SmolLM2-135M-Instruct), loaded once per session."""
    from belieflens.model.load import load

    return load("smollm2-135m")


@pytest.fixture(scope="session")
def tiny_dir(
    smol_tokenizer: PreTrainedTokenizerBase, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A 2-layer random Llama saved with its tokenizer: usable as ``--model DIR``."""
    folder = tmp_path_factory.mktemp("tiny-model")
    tiny_llama(smol_tokenizer, seed=7).save_pretrained(folder)
    smol_tokenizer.save_pretrained(folder)
    return folder


def assert_same_data(a: Path, b: Path) -> None:
    """Every variable of two cache files is identical, bit for bit (NaN equal to NaN)."""
    with xr.open_dataset(a, engine="h5netcdf") as x, xr.open_dataset(b, engine="h5netcdf") as y:
        assert sorted(map(str, x.variables)) == sorted(map(str, y.variables))
        for name in x.variables:
            u, v = x[name].values, y[name].values
            assert u.dtype == v.dtype and u.shape == v.shape, name
            if u.dtype.kind == "f":
                assert np.array_equal(u, v, equal_nan=True), name
            else:
                assert (u == v).all(), name


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Run a module's tiny-model work on one thread (tiny matmuls gain nothing from two, and
    two threads stall badly when the machine is busy); restores the setting after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def unrendered_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Figures are built (every plotting call runs) but not rasterised: each is written as a
    one-pixel PNG. For tests of what is not a figure (tables, reports, shards, sections),
    where rasterising was a third to a half of an analysis's time; the figures themselves are
    rendered where they are tested (tests/report/test_figures.py, the README's walk-through,
    the viewer's browser tests)."""
    import io

    from matplotlib.figure import Figure
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buffer, format="PNG")
    pixel = buffer.getvalue()

    def savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> None:
        Path(fname).write_bytes(pixel)

    monkeypatch.setattr(Figure, "savefig", savefig)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Debian's headless Chromium on a fresh profile (tests/report/browser.py); the test is
    skipped where chromium or playwright is missing."""
    from tests.report.browser import browser_or_skip, chromium

    browser_or_skip()
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as ctx:
        yield ctx
