"""The C heap helpers: the arena limit reaches this process's environment (so Dask workers
started afterwards inherit it) and yields to an explicit setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from belieflens import heap

glibc = pytest.mark.skipif(heap._libc() is None, reason="needs glibc")


@glibc
def test_limit_sets_environment_for_children(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert heap.limit_arenas(3)
    assert os.environ["MALLOC_ARENA_MAX"] == "3"
    out = subprocess.run([sys.executable, "-c", "import os; print(os.environ['MALLOC_ARENA_MAX'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    assert out == "3"


@glibc
def test_explicit_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "5")
    assert heap.limit_arenas(2)
    assert os.environ["MALLOC_ARENA_MAX"] == "5"


@glibc
def test_unusable_setting_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "many")
    assert not heap.limit_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "many"

