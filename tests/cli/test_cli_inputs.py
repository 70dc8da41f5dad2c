"""Bad input is refused before any work: one line naming the option, exit 2, nothing on disk.

Damaged or foreign cache files give one clear line from ``open_cache``,
``info`` and ``analyze``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from belieflens import envs, open_cache
from belieflens.cli.main import app
from belieflens.errors import CacheFileError
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache
from belieflens.store.cache import cache_attrs
from belieflens.store.file import partial_path

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--batch-size", "0"], "'--batch-size' = 0"),
        (["--max-tokens", "0"], "'--max-tokens' = 0"),
        (["--threads", "-1"], "'--threads' = -1"),
        (["--window", "0"], "'--window' = 0"),
        (["--max-memory", "lots"], "'--max-memory' = 'lots'"),
        (["--max-memory", "0GB"], "'--max-memory' = '0GB'"),
        (["--max-memory", "1.5XB"], "'--max-memory' = '1.5XB'"),
        (["--seed", "-1"], "'--seed' = -1"),
        (["--episodes", "-2"], "'--episodes' = -2"),
        (["--padding", "middle"], "'--padding' = 'middle'"),
        (["--resid-dtype", "int8"], "'--resid-dtype' = 'int8'"),
        (["--dtype", "float64"], "'--dtype' = 'float64'"),
        (["--kernels", "mkl"], "'--kernels' = 'mkl'"),
        (["--set", "turns=-3"], "'turns'"),
        (["--set", "turns=many"], "'turns'"),
        (["--set", "nope=1"], "unknown parameter 'nope'"),
        (["--model", "/no/such/model.gguf"], "GGUF file not found"),
    ],
)
def test_bad_options_refused_before_work(args: list[str], fragment: str, tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    r = runner.invoke(app, ["extract", "coin-flip", *args, "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert fragment in r.output and r.output.count("\n") == 1, r.output
    assert "allowed" in r.output or "not found" in r.output or "unknown" in r.output
    assert list(tmp_path.iterdir()) == []


def test_budget_below_one_readout_says_the_minimum(tiny_dir: Path, tmp_path: Path) -> None:
    """A budget that is a size but too small for one read-out: one line with the minimum (a
    size that passes back as --max-memory and runs), exit 2, nothing written."""
    out = tmp_path / "x.h5"
    args = ["extract", "coin-flip", "--model", str(tiny_dir), "--set", "turns=1", "--episodes",
            "1", "--quiet", "--out", str(out)]
    r = runner.invoke(app, [*args, "--max-memory", "64K"])
    assert r.exit_code == 2, r.output
    error = r.output.strip().splitlines()[-1]  # after the line saying the model loaded
    assert r.output.count("error") == 1 and error.startswith("error: option '--max-memory' = 64KiB")
    assert "needs at least" in error, r.output
    assert list(tmp_path.iterdir()) == []
    minimum = r.output.rsplit(" ", 1)[-1].strip()
    r = runner.invoke(app, [*args, "--max-memory", minimum])
    assert r.exit_code == 0, r.output
    assert out.is_file()


def test_out_in_missing_folder_or_a_directory(tmp_path: Path) -> None:
    r = runner.invoke(app, ["extract", "coin-flip", "--out", str(tmp_path / "no" / "x.h5")])
    assert r.exit_code == 2 and "does not exist" in r.output
    r = runner.invoke(app, ["extract", "coin-flip", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_out_in_unwritable_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        r = runner.invoke(app, ["extract", "coin-flip", "--out", str(folder / "x.h5")])
    finally:
        folder.chmod(0o700)
    assert r.exit_code == 2 and "not writable" in r.output


# --- damaged cache files ---------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tiny_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cache(envs.get("coin-flip", turns=1), tiny_model,
                   tmp_path_factory.mktemp("cli") / "small.h5", ExtractOptions(episodes=1))


def _version(h: h5py.File) -> None:
    h.attrs["schema_version"] = 99


def _drop(h: h5py.File) -> None:
    del h["oracle"]


def _building(h: h5py.File) -> None:
    h.attrs.modify("status", np.bytes_(b"building"))


def _out_of_range(h: h5py.File) -> None:
    h["answer_pos"][0] = 10**6


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (_version, "schema version 99"),
        (_drop, "lacks required variables: oracle"),
        (_building, "incomplete"),
        (_out_of_range, "'answer_pos' holds an out-of-range value"),
    ],
)
def test_damaged_cache_files(
    small: Path, tmp_path: Path, edit: Callable[[h5py.File], None], fragment: str
) -> None:
    bad = tmp_path / "bad.h5"
    shutil.copy(small, bad)
    with h5py.File(bad, "r+") as h:
        edit(h)
    with pytest.raises(CacheFileError, match=fragment):
        open_cache(bad)
    if edit is not _out_of_range:  # values are checked by open_cache only
        with pytest.raises(CacheFileError, match=fragment):
            cache_attrs(bad)
    for cmd in ("info", "analyze"):
        r = runner.invoke(app, [cmd, str(bad)])
        assert r.exit_code == 2 and fragment in r.output and r.output.count("\n") == 1


def test_attributes_read_alone_equal_the_opened_files(small: Path) -> None:
    with open_cache(small) as ds:
        want = dict(ds.attrs)
    got = cache_attrs(small)
    assert list(got) == list(want)
    assert all(type(got[k]) is type(want[k]) and np.array_equal(got[k], want[k]) for k in want)


def test_truncated_and_partial_files(small: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.h5"
    cut.write_bytes(small.read_bytes()[:5000])
    for read in (open_cache, cache_attrs):
        with pytest.raises(CacheFileError, match="corrupt or unreadable"):
            read(cut)
    out = tmp_path / "run.h5"
    shutil.copy(small, partial_path(out))
    with h5py.File(partial_path(out), "r+") as h:
        h["complete"][3:] = 0
        h.attrs.modify("status", np.bytes_(b"building"))
    for cmd in ("info", "analyze"):
        r = runner.invoke(app, [cmd, str(out)])
        assert r.exit_code == 2 and "holds 3 of" in r.output and "resume" in r.output
    r = runner.invoke(app, ["info", str(partial_path(out))])
    assert r.exit_code == 2 and "3 of" in r.output and "incomplete" in r.output
    r = runner.invoke(app, ["info", "--verify", str(out)])
    assert r.exit_code == 1 and "3 of" in r.output


def test_model_folder_without_or_with_broken_weights(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    work = tmp_path / "work"
    work.mkdir()
    out = work / "x.h5"
    r = runner.invoke(app, ["extract", "coin-flip", "--model", str(folder), "--out", str(out)])
    assert r.exit_code == 2 and "has no weights" in r.output
    (folder / "model.safetensors").write_bytes(b"\0\0")
    r = runner.invoke(app, ["extract", "coin-flip", "--model", str(folder), "--out", str(out),
                            "--quiet"])
    assert r.exit_code == 2 and "could not be loaded" in r.output, r.output
    assert "Traceback" not in r.output
    assert list(work.iterdir()) == []  # not even the lock file is left
