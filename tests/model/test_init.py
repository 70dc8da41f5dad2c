"""Untrained controls (``--init``): parsing, the architecture's own initialisation seeded,
shuffled tensors, provenance, bit-reproducible files, and one-line errors writing nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import belieflens
from belieflens.cli.main import app
from belieflens.errors import BeliefLensError, ParameterError
from belieflens.model.init import Init, initialise, weights_digest
from belieflens.model.load import load
from tests.conftest import assert_same_data


@given(st.sampled_from(["random", "shuffled"]), st.integers(0, 2**63 - 1))
def test_parse_round_trips(kind: str, seed: int) -> None:
    init = Init.parse(f"{kind}:{seed}")
    assert (init.kind, init.seed) == (kind, seed) and Init.parse(str(init)) == init


@pytest.mark.parametrize("text, fragment", [
    ("gaussian:1", "unknown kind 'gaussian'"),
    ("random:x", "'x' is not an integer"),
    ("random:1.5", "'1.5' is not an integer"),
    ("random", "'' is not an integer"),
    ("random:-2", "0..2**63-1"),
    ("trained:3", "unknown kind"),
])
def test_bad_init_is_one_line(text: str, fragment: str) -> None:
    with pytest.raises(ParameterError) as e:
        Init.parse(text)
    assert fragment in str(e.value) and "'--init'" in str(e.value)
    assert "\n" not in str(e.value)


def _state(model: Any) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def test_random_is_the_architectures_own_initialisation_seeded(tiny_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(tiny_dir)
    before = _state(trained)
    a, b, c = (initialise(trained, Init("random", s)) for s in (3, 3, 4))
    assert weights_digest(a) == weights_digest(b) != weights_digest(c)
    assert _state(trained).keys() == before.keys()
    assert all(np.array_equal(v, before[k]) for k, v in _state(trained).items())  # untouched
    sd = _state(a)
    std = float(trained.config.initializer_range)
    emb = sd["model.embed_tokens.weight"]
    assert abs(float(emb.std()) - std) < 0.1 * std  # Llama's normal(0, initializer_range)
    assert np.all(sd["model.layers.0.input_layernorm.weight"] == 1.0)  # RMSNorm weight = 1
    assert a.model.embed_tokens.weight is a.lm_head.weight  # the config's tying is kept
    assert torch.equal(a.model.embed_tokens.weight, b.model.embed_tokens.weight)


def test_shuffled_permutes_each_tensor(tiny_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(tiny_dir)
    before = _state(trained)
    shuffled = initialise(copy.deepcopy(trained), Init("shuffled", 0))
    again = initialise(copy.deepcopy(trained), Init("shuffled", 0))
    assert weights_digest(shuffled) == weights_digest(again) != weights_digest(trained)
    moved = 0
    for k, v in _state(shuffled).items():
        assert np.array_equal(np.sort(v, axis=None), np.sort(before[k], axis=None)), k
        moved += int(not np.array_equal(v, before[k]))
    assert moved >= len(before) // 2  # constant tensors (norm weights of 1) stay as they are


def test_load_records_the_control(tiny_dir: Path) -> None:
    trained = load(str(tiny_dir))
    control = load(str(tiny_dir), init="random:5")
    assert trained.info.init == "trained" and trained.info.base_weights_hash == ""
    assert (control.info.init, control.info.init_seed) == ("random", 5)
    assert control.info.base_weights_hash == trained.info.weights_hash
    assert control.info.weights_hash not in ("", trained.info.weights_hash)
    assert control.info.official_id == trained.info.official_id


def _extract(tiny_dir: Path, out: Path, init: str | None) -> Path:
    return belieflens.extract("coin-flip", params={"turns": 1, "delivery": "single-turn"},
                              model=str(tiny_dir), out=out, episodes=2, seed=0, init=init,
                              threads=1, kernels="default")


def test_files_are_bit_reproducible_per_seed(tiny_dir: Path, tmp_path: Path,
                                             one_thread: None) -> None:
    a = _extract(tiny_dir, tmp_path / "a.h5", "random:1")
    b = _extract(tiny_dir, tmp_path / "b.h5", "random:1")
    c = _extract(tiny_dir, tmp_path / "c.h5", "random:2")
    t = _extract(tiny_dir, tmp_path / "t.h5", None)
    t2 = _extract(tiny_dir, tmp_path / "t2.h5", "trained")
    assert_same_data(a, b)
    assert_same_data(t, t2)
    with h5py.File(a) as fa, h5py.File(c) as fc, h5py.File(t) as ft:
        assert not np.array_equal(fa["resid"][:, 1:], fc["resid"][:, 1:])
        assert not np.array_equal(fa["resid"][:, 1:], ft["resid"][:, 1:])
        assert np.array_equal(fa["input_ids"][:], ft["input_ids"][:])  # same queries
        assert fa.attrs["model_init"] == "random"
        assert np.asarray(fa.attrs["model_init_seed"]).item() == 1
        assert fa.attrs["model_base_weights_hash"] == ft.attrs["weights_hash"]
        assert ft.attrs["model_init"] == "trained" and "model_init_seed" not in ft.attrs
        assert fa.attrs["study_fingerprint"] != ft.attrs["study_fingerprint"]
    assert "--init random:1" in belieflens.api.rerun_command(a)


@pytest.mark.parametrize("init, fragment", [
    ("uniform:1", "unknown kind 'uniform'"),
    ("random:one", "'one' is not an integer"),
])
def test_cli_bad_init_exits_2_writing_nothing(init: str, fragment: str, tiny_dir: Path,
                                              tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["extract", "coin-flip", "--model", str(tiny_dir), "--init",
                                 init, "--out", str(tmp_path / "x.h5")])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_a_loaded_model_cannot_be_made_a_control(tiny_model: Any, tmp_path: Path) -> None:
    with pytest.raises(BeliefLensError, match="already loaded") as e:
        belieflens.extract("coin-flip", model=tiny_model, out=tmp_path / "x.h5", init="random:0")
    assert "\n" not in str(e.value) and list(tmp_path.iterdir()) == []
