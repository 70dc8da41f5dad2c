"""Fixtures of the viewer tests: a tiny study (the tiny random model on a coin flip, both
deliveries, both probes, 3 episodes of 3 turns) and its analysis with the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def viewer_study(tiny_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny study's cache file (with its token-text table)."""
    import belieflens.envs as envs
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    env = envs.get("coin-flip", turns=3, bins=2)
    out = tmp_path_factory.mktemp("viewer-study") / "coin-flip.h5"
    return write_cache(env, tiny_model, out, ExtractOptions(episodes=3, seed=0))


@pytest.fixture(scope="session")
def viewer_out(viewer_study: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``analyze --out`` of the tiny study (no probes): the folder with ``study.html``."""
    from belieflens.api import analyze

    out = tmp_path_factory.mktemp("viewer-out")
    analyze(viewer_study, out, decoders=False)
    return out
