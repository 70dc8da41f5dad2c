"""``info --verify``: a consistent file passes; each kind of damage gives its own line."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from belieflens import envs
from belieflens.cli.main import app
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache
from belieflens.store.verify import verify

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def good(tiny_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = envs.get("coin-flip", turns=1)
    return write_cache(env, tiny_model, tmp_path_factory.mktemp("verify") / "good.h5",
                   ExtractOptions(episodes=1, save_logits=True))


def _set(name: str, index: Any, value: Any) -> Callable[[h5py.File], None]:
    def edit(h: h5py.File) -> None:
        hidden = f"_nc4_non_coord_{name}"  # a variable named like a dimension
        h[hidden if hidden in h else name][index] = value

    return edit


def _attr(h: h5py.File) -> None:
    h.attrs["study"] = h.attrs["study"].replace('"seed": 0', '"seed": 5')


def test_consistent_file_passes(good: Path) -> None:
    assert verify(good) == []
    r = CliRunner().invoke(app, ["info", "--verify", str(good)])
    assert r.exit_code == 0 and r.output.startswith("ok: ")


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (_set("option_logprob", (3, 0), 0.5), "option_logprob above 0"),
        (_set("option_logprob", (1, 1), np.nan), "option_logprob non-finite"),
        (_set("oracle", (2, 0), 0.9), "oracle rows not summing to 1"),
        (_set("oracle", (2, 0), -0.5), "negative or non-finite"),
        (_set("complete", 4, 0), "only"),
        (_set("resid", (0, 1, 3), np.inf), "resid non-finite"),
        (_set("outcome", (3, 0), 9), "outcome outside"),
        (_set("answer_pos", 2, -3), "answer_pos outside"),
        (_set("logprobs", (1, 0), 3.0), "logprobs not normalised"),
        (_attr, "study_fingerprint does not match"),
    ],
)
def test_each_problem_is_reported(
    good: Path, tmp_path: Path, edit: Callable[[h5py.File], None], fragment: str
) -> None:
    bad = tmp_path / "bad.h5"
    shutil.copy(good, bad)
    with h5py.File(bad, "r+") as h:
        edit(h)
    problems = verify(bad)
    assert any(fragment in p for p in problems), problems
    r = CliRunner().invoke(app, ["info", "--verify", str(bad)])
    assert r.exit_code == 1
    assert fragment in r.output and "Traceback" not in r.output


def test_not_a_cache_file(tmp_path: Path) -> None:
    f = tmp_path / "x.h5"
    f.write_bytes(b"hello")
    assert verify(f) == [f"{f}: not an HDF5 file"]
    assert "no such file" in verify(tmp_path / "none.h5")[0]
