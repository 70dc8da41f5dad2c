"""``info --rerun-command``: the command names the kernels that ran and omits defaults."""

from __future__ import annotations

import shlex
from pathlib import Path

import belieflens.envs as envs
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions, extract
from belieflens.store.info import rerun_command


def test_rerun_command_names_kernels_and_nondefault_window(tiny_model: LoadedModel,
                                                           tmp_path: Path) -> None:
    env = envs.get("coin-flip", turns=1)
    out = extract(env, tiny_model, tmp_path / "a.h5", ExtractOptions(episodes=1))
    args = shlex.split(rerun_command(out))
    assert args[args.index("--kernels") + 1] == tiny_model.info.kernels
    assert "--window" not in args  # the default window is left out
    small = extract(env, tiny_model, tmp_path / "b.h5", ExtractOptions(episodes=1, window=5))
    args = shlex.split(rerun_command(small))
    assert args[args.index("--window") + 1] == "5"
