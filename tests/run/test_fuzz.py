"""Fuzzing the cache reader: random byte corruption of a real file written with a tiny model.

Whatever bytes are damaged, ``open_cache``, ``info``, ``analyze`` and ``verify`` either work
or raise :class:`CacheFileError` (one line); ``verify`` returns its consistency problems as
lines and raises only for data it cannot read or whose checksums fail (``info --verify``
exits 2 there, 1 on consistency problems).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belieflens import envs, open_cache
from belieflens.api import analyze
from belieflens.errors import CacheFileError
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache
from belieflens.store.info import describe, rerun_command
from belieflens.store.verify import verify

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def clean(tiny_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    env = envs.get("coin-flip", turns=1, delivery="multi-turn")
    path = write_cache(env, tiny_model, tmp_path_factory.mktemp("fuzz") / "clean.h5",
                   ExtractOptions(episodes=1))
    return path.read_bytes()


def _read_everything(path: Path) -> None:
    lines: list[str] = []
    for call in (lambda: open_cache(path).close(), lambda: describe(path),
                 lambda: rerun_command(path), lambda: analyze(path),
                 lambda: lines.extend(verify(path))):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call()
        except CacheFileError as e:
            assert "\n" not in str(e)
    assert all(isinstance(line, str) and "\n" not in line for line in lines)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_byte_corruption_raises_only_cache_file_errors(
    clean: bytes, tmp_path: Path, data: st.DataObject
) -> None:
    n = len(clean)
    # half the damage lands in the first 4 KiB (superblock, root group, object headers)
    where = st.one_of(st.integers(0, min(4095, n - 1)), st.integers(0, n - 1))
    edits = data.draw(st.lists(st.tuples(where, st.integers(0, 255)), min_size=1, max_size=8))
    raw = bytearray(clean)
    for offset, value in edits:
        raw[offset] = value
    path = tmp_path / "damaged.h5"
    path.write_bytes(bytes(raw))
    _read_everything(path)


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
def test_truncated_file_is_a_cache_file_error(clean: bytes, tmp_path: Path, cut: float) -> None:
    path = tmp_path / "short.h5"
    path.write_bytes(clean[: int(len(clean) * cut)])
    with pytest.raises(CacheFileError):
        open_cache(path)
    _read_everything(path)
