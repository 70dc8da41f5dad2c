"""Model resolution: clear errors, and the real Hugging Face folder loading path."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from belieflens.errors import ModelNotFoundError
from belieflens.model.load import load, resolve
from tests.conftest import tiny_llama

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("no-such-model", "unknown model"),
        ("/nonexistent/file.gguf", "GGUF file not found"),
        ("someorg/some-model-that-is-not-cached", "not in the local Hugging Face cache"),
    ],
)
def test_unresolvable_models_one_line(spec: str, fragment: str) -> None:
    with pytest.raises(ModelNotFoundError) as e:
        resolve(spec)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"config\.json"):
        resolve(str(tmp_path))


def test_embedded_resolves_to_shipped_gguf() -> None:
    src = resolve("smollm2-135m")
    assert src.kind == "embedded" and (src.path / str(src.gguf_file)).is_file()


def test_load_hugging_face_folder(smol_tokenizer: PreTrainedTokenizerBase, tmp_path: Path) -> None:
    import torch

    model = tiny_llama(smol_tokenizer, seed=1)
    model.save_pretrained(tmp_path)
    smol_tokenizer.save_pretrained(tmp_path)
    loaded = load(str(tmp_path))
    assert loaded.info.source == "directory"
    assert loaded.info.n_layers == 2 and loaded.info.d_model == 64
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.inference_mode():
        a = loaded.bridge(ids)
        b = tiny_llama(smol_tokenizer, seed=1)(ids).logits
    assert np.allclose(a.numpy(), b.numpy(), atol=1e-4)
