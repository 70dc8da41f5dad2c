"""Fixtures of the cache tests: a tiny random model saved as a Hugging Face folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import xarray as xr

from tests.conftest import tiny_llama

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


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
