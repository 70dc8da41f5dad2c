"""Fixtures of the intervention tests: a small coin-flip study of the tiny random model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_study(tiny_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Coin flip, 4 episodes x 2 turns, multi-turn delivery, 2 bias bins: 48 read-outs."""
    import belieflens.envs as envs
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    env = envs.get("coin-flip", turns=2, bins=2, delivery="multi-turn")
    out = tmp_path_factory.mktemp("study") / "study.h5"
    return write_cache(env, tiny_model, out, ExtractOptions(episodes=4, seed=0))
