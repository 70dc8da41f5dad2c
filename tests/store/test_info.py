"""``info --rerun-command``: the command names the kernels that ran and omits defaults."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

import belieflens.envs as envs
from belieflens.errors import ParameterError
from belieflens.model.load import LoadedModel
from belieflens.run.budget import parse_size
from belieflens.run.extract import ExtractOptions, prepare
from belieflens.run.lifecycle import write_cache
from belieflens.store.info import rerun_command
from tests.conftest import assert_same_data


def test_rerun_command_names_kernels_and_nondefault_window(tiny_model: LoadedModel,
                                                           tmp_path: Path) -> None:
    env = envs.get("coin-flip", turns=1)
    out = write_cache(env, tiny_model, tmp_path / "a.h5", ExtractOptions(episodes=1))
    args = shlex.split(rerun_command(out))
    assert args[args.index("--kernels") + 1] == tiny_model.info.kernels
    assert "--window" not in args  # the default window is left out
    small = write_cache(env, tiny_model, tmp_path / "b.h5", ExtractOptions(episodes=1, window=5))
    args = shlex.split(rerun_command(small))
    assert args[args.index("--window") + 1] == "5"
    assert "--max-memory" not in args  # the default budget is left out


def test_a_budget_is_rerun_and_changes_no_bit(tiny_model: LoadedModel, tmp_path: Path) -> None:
    """A file extracted under the least budget that keeps its batches (over the least one
    read-out needs) equals the default's bit for bit, and its rerun command names the budget."""
    env = envs.get("coin-flip", turns=4, delivery="multi-turn")
    base = ExtractOptions(episodes=2, max_rows=2, max_tokens=400)
    out = write_cache(env, tiny_model, tmp_path / "a.h5", base)
    with pytest.raises(ParameterError, match="needs at least ") as e:
        write_cache(env, tiny_model, tmp_path / "b.h5", replace(base, max_memory=1024))
    least = parse_size(str(e.value).rsplit(" ", 1)[-1])
    assert prepare(env, tiny_model, replace(base, max_memory=least)).max_tokens < 400
    while prepare(env, tiny_model, replace(base, max_memory=least)).max_tokens < 400:
        least += least // 16
    tight = write_cache(env, tiny_model, tmp_path / "b.h5", replace(base, max_memory=least))
    assert_same_data(out, tight)
    args = shlex.split(rerun_command(tight))
    assert args[args.index("--max-memory") + 1] == str(least)
