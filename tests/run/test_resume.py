"""Resume: an interrupted extraction continues where it stopped and equals an uninterrupted run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from belieflens import envs, open_cache
from belieflens.episodes.base import Environment
from belieflens.errors import CacheFileError
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery
from belieflens.run import runner
from belieflens.run.extract import ExtractOptions, Progress
from belieflens.run.lifecycle import write_cache
from belieflens.run.resume import done_windows, windows
from belieflens.run.rows import ReadOut
from belieflens.store.file import Sizes, chunk_rows, partial_path, read_partial
from belieflens.store.fingerprint import (
    Study,
    StudyModel,
    StudyOptions,
    differences,
    fingerprint,
)
from tests.conftest import assert_same_data

pytestmark = pytest.mark.usefixtures("one_thread")

OPTIONS = ExtractOptions(episodes=2, max_rows=3, window=4)


class _StopError(Exception):
    """Raised by the test's progress callback to interrupt an extraction."""


def _env() -> Environment:
    return envs.get("coin-flip", turns=1, delivery="multi-turn")


def _interrupt_after(rows: int) -> Callable[[Progress], None]:
    def report(p: Progress) -> None:
        if p.done >= rows:
            raise _StopError

    return report


@pytest.fixture(scope="module")
def reference(tiny_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cache(_env(), tiny_model, tmp_path_factory.mktemp("ref") / "ref.h5", OPTIONS)


def test_windows_and_chunks() -> None:
    assert windows(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert done_windows(np.array([1, 1, 1, 1, 1, 0, 1, 1, 1, 1]), windows(10, 4)) == {0, 2}
    assert chunk_rows(256) == 64 and chunk_rows(100) == 50 and chunk_rows(7) == 7
    assert differences({"seed": 0, "a": 1}, {"seed": 1, "a": 1}) == "seed 0 -> 1"


def test_study_record_keeps_the_stored_form() -> None:
    """The study's JSON and fingerprint are those written before it was a record (flat keys,
    ``model_*``), so partial files of earlier runs still resume."""
    sizes = Sizes(query=12, layer=3, d_model=64, token=40, option=2, cont_token=1, outcome=2,
                  lens_token=4)
    params = {"a0": 1.0, "b0": 1.0, "theta": None, "turns": 2, "per_turn": 1, "bins": 5,
              "delivery": "all"}
    study = Study(
        env_name="coin-flip", env_params=params, seed=3, episodes=2,
        model=StudyModel(id="m", weights_hash="w", dtype="float32", device="cpu",
                         kernels="default"),
        options=StudyOptions(window=8, max_rows=16, max_tokens=8192, row_tokens=0,
                             padding_side="right", resid_dtype="float32", save_logits=False,
                             prefix_reuse=True, cont_resid=False),
        sizes=sizes, queries_sha256="q" * 64,
    )
    stored = study.to_json()
    assert stored["model_kernels"] == "default" and stored["window"] == 8
    assert stored["sizes"]["lens_token"] == 4 and stored["schema_version"] == 1
    # computed with the dict-built study of commit f206a46 for the same inputs
    golden = "f0757a59b22ca3875c6058422a29d81ada47601e8854a0c5804b7112de50407d"
    assert study.fingerprint() == fingerprint(stored) == golden
    packed = dataclasses.replace(study, options=dataclasses.replace(study.options, row_tokens=256))
    assert packed.to_json()["row_tokens"] == 256 and packed.fingerprint() != golden


def test_same_options_reproduce_identical_data(
    tiny_model: LoadedModel, reference: Path, tmp_path: Path
) -> None:
    again = write_cache(_env(), tiny_model, tmp_path / "again.h5", OPTIONS)
    assert_same_data(reference, again)


def test_interrupted_run_resumes_to_identical_file(
    tiny_model: LoadedModel, reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run.h5"
    with pytest.raises(_StopError):
        write_cache(_env(), tiny_model, out, OPTIONS, on_progress=_interrupt_after(9))
    assert not out.exists()
    state = read_partial(partial_path(out))
    assert int(state.complete.sum()) == 8  # two windows of four written, the third lost
    with pytest.raises(CacheFileError, match="8 of"):
        open_cache(out)
    computed: list[int] = []
    real = runner.run_queries

    def counting(
        model: LoadedModel, tqs: Sequence[TokenizedQuery], **kw: Any
    ) -> Iterator[tuple[list[int], list[ReadOut], int]]:
        computed.append(len(tqs))
        return real(model, tqs, **kw)

    monkeypatch.setattr(runner, "run_queries", counting)
    seen: list[Progress] = []
    done = write_cache(_env(), tiny_model, out, OPTIONS, on_progress=seen.append)
    n = int(state.complete.size)
    assert sum(computed) == n - 8  # nothing computed twice
    assert seen[0].resumed == 8
    assert not partial_path(out).exists()
    assert_same_data(reference, done)


def test_other_study_on_the_same_path_is_refused(tiny_model: LoadedModel, tmp_path: Path) -> None:
    out = tmp_path / "run.h5"
    with pytest.raises(_StopError):
        write_cache(_env(), tiny_model, out, OPTIONS, on_progress=_interrupt_after(5))
    other = ExtractOptions(episodes=2, max_rows=3, window=4, seed=1)
    with pytest.raises(CacheFileError, match=r"another study \(.*seed 0 -> 1.*--overwrite"):
        write_cache(_env(), tiny_model, out, other)
    bigger = ExtractOptions(episodes=2, max_rows=5, window=4)
    with pytest.raises(CacheFileError, match="max_rows 3 -> 5"):
        write_cache(_env(), tiny_model, out, bigger)
    done = write_cache(_env(), tiny_model, out, other, overwrite=True)
    with h5py.File(done) as h:
        assert int(np.asarray(h.attrs["seed"]).item()) == 1


def test_damaged_partial_is_one_line_and_overwrite_restarts(
    tiny_model: LoadedModel, tmp_path: Path
) -> None:
    out = tmp_path / "run.h5"
    partial_path(out).write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 200)
    with pytest.raises(CacheFileError) as e:
        write_cache(_env(), tiny_model, out, OPTIONS)
    assert "--overwrite" in str(e.value) and "\n" not in str(e.value)
    done = write_cache(_env(), tiny_model, out, OPTIONS, overwrite=True)
    open_cache(done).close()


def test_resumed_file_records_options(reference: Path) -> None:
    with h5py.File(reference) as h:
        assert '"window": 4' in h.attrs["extract_options"]
        assert len(h.attrs["study_fingerprint"]) == 64
        assert h.attrs["status"] == b"complete"
