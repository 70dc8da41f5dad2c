"""Per-chunk checksums: damaged bytes that decode to finite numbers are refused on every read
path in one line naming the file, the variable and the rows; intact files read as before;
files written before checksums still open; resume resets a torn chunk."""

from __future__ import annotations

import functools
import hashlib
import shutil
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from belieflens import envs, open_cache
from belieflens.analysis.beliefs import lens_beliefs
from belieflens.cli.main import app
from belieflens.errors import CacheFileError
from belieflens.run import extract as extract_mod
from belieflens.run.extract import ExtractOptions, Progress
from belieflens.run.lifecycle import write_cache
from belieflens.store import file as store
from belieflens.store.file import partial_path
from belieflens.store.info import describe
from belieflens.store.integrity import check_file, h5_name
from tests.conftest import assert_same_data

pytestmark = pytest.mark.usefixtures("one_thread")

OPTIONS = ExtractOptions(episodes=2, max_rows=4, window=8)


def _env() -> Any:
    return envs.get("coin-flip", turns=1, delivery="multi-turn")


@pytest.fixture(scope="module")
def good(tiny_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cache(_env(), tiny_model, tmp_path_factory.mktemp("ck") / "good.h5", OPTIONS)


@pytest.fixture(scope="module")
def old(tiny_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same study written as before checksums (no filter, contiguous static variables)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(extract_mod, "create_partial",
                   functools.partial(store.create_partial, checksums=False))
        return write_cache(_env(), tiny_model, tmp_path_factory.mktemp("ck") / "old.h5", OPTIONS)


def _damage(src: Path, dst: Path, name: str, row: int) -> None:
    """Copy ``src`` to ``dst`` and change up to 16 values of ``name``'s chunk holding ``row``
    into other finite values, in the raw bytes."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r") as h:
        d = h[h5_name(h, name)]
        info = d.id.get_chunk_info_by_coord((row // d.chunks[0] * d.chunks[0],
                                             *(0,) * (d.ndim - 1)))
        offset, dtype = int(info.byte_offset), d.dtype
        count = min(16, (info.size - 4) // dtype.itemsize)
        start = (row % d.chunks[0]) * (d.size // d.shape[0])
        start = min(start, (info.size - 4) // dtype.itemsize - count)
    with open(dst, "r+b") as f:
        f.seek(offset + start * dtype.itemsize)
        values = np.frombuffer(f.read(count * dtype.itemsize), dtype=dtype).copy()
        if dtype.kind == "f":
            values = np.where(np.isfinite(values), values * 0.5 + 1.0, 0.25).astype(dtype)
        else:
            values = values ^ 1
        assert np.isfinite(values.astype(np.float64)).all()
        f.seek(offset + start * dtype.itemsize)
        f.write(values.tobytes())


def _one_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def test_intact_file_reads_as_without_checksums(good: Path, old: Path) -> None:
    assert_same_data(good, old)
    with open_cache(good) as a, open_cache(old) as b:
        assert a["resid"].encoding["fletcher32"] and not b["resid"].encoding["fletcher32"]
        assert a["unembed"].encoding["fletcher32"]  # static variables are checksummed too
        for name in a.variables:
            assert a[name].dtype == b[name].dtype, name
            assert np.array_equal(a[name].values, b[name].values,
                                  equal_nan=a[name].dtype.kind == "f"), name
    assert check_file(good) == [] and check_file(old) == []


def test_info_says_whether_a_file_has_checksums(good: Path, old: Path) -> None:
    with open_cache(good) as ds:
        n = len(ds.variables)
    line = f"checksums: fletcher32 (numbers) or CRC-32 (text) per chunk on {n} of {n} variables"
    assert line in describe(good).splitlines()
    assert "checksums: none" in describe(old)
    r = CliRunner().invoke(app, ["info", "--verify", str(old)])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    "name, row, lazy",
    [("resid", 12, True), ("option_logprob", 0, False), ("answer_pos", 6, False),
     ("oracle", 20, False), ("episode", 1, False), ("input_ids", 10, True)],
)
def test_damage_is_refused_on_every_read_path(
    good: Path, tmp_path: Path, name: str, row: int, lazy: bool
) -> None:
    bad = tmp_path / "bad.h5"
    _damage(good, bad, name, row)
    chunk = OPTIONS.window  # rows per chunk: the window (8)
    first = row // chunk * chunk
    rows = f"rows {first}\u2013{first + chunk - 1}"
    expected = f"{bad}: variable {name!r} {rows} are damaged (checksum mismatch)"

    # plain xarray readers are refused by HDF5 itself
    with xr.open_dataset(bad, engine="h5netcdf") as plain, pytest.raises(OSError):
        plain[name].values  # noqa: B018

    # open_cache, then the values (lazy variables fail on read, the rest at open)
    with pytest.raises(CacheFileError) as e:
        ds = open_cache(bad)
        try:
            ds[name].values  # noqa: B018
        finally:
            ds.close()
    assert str(e.value) == expected

    # an analysis function on a lazily damaged variable
    if name == "resid":
        with open_cache(bad) as ds, pytest.raises(CacheFileError, match="'resid' rows"):
            lens_beliefs(ds)
        with open_cache(bad, chunks={"query": 8}) as ds, pytest.raises(CacheFileError):
            ds["resid"].mean().compute()  # dask tasks too

    # the CLI: one line, exit 2, nothing written
    out = tmp_path / "report"
    r = CliRunner().invoke(app, ["analyze", str(bad), "--out", str(out), "--no-decoders"])
    assert r.exit_code == 2 and _one_line(r.output) == f"error: {expected}"
    assert not out.exists() or not any(out.iterdir())
    r = CliRunner().invoke(app, ["info", "--verify", str(bad)])
    assert r.exit_code == 2 and _one_line(r.output) == f"error: {expected}"
    assert check_file(bad) == [expected.removeprefix(f"{bad}: ")]
    r = CliRunner().invoke(app, ["info", str(bad)])
    if lazy:  # info reads only the small variables (and each variable's first and last value)
        assert r.exit_code in (0, 2)
    else:
        assert r.exit_code == 2 and _one_line(r.output) == f"error: {expected}"


class _StopError(Exception):
    """Raised by the test's progress callback to interrupt an extraction."""


def _stop_after_first_window(p: Progress) -> None:
    raise _StopError


def _metadata_hash(path: Path) -> str:
    """SHA-256 of the file with every chunk's bytes zeroed: its metadata."""
    data = bytearray(path.read_bytes())
    with h5py.File(path, "r") as h:
        for _, d in h.items():
            if isinstance(d, h5py.Dataset) and d.chunks is not None:
                for i in range(d.id.get_num_chunks()):
                    c = d.id.get_chunk_info(i)
                    data[c.byte_offset : c.byte_offset + c.size] = bytes(c.size)
    return hashlib.sha256(bytes(data)).hexdigest()


def test_resume_resets_a_torn_chunk_and_writes_touch_no_metadata(
    tiny_model: Any, good: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.h5"
    with pytest.raises(_StopError):
        write_cache(_env(), tiny_model, out, OPTIONS, on_progress=_stop_after_first_window)
    partial = partial_path(out)
    n = store.read_partial(partial).complete.size
    last = n // OPTIONS.window * OPTIONS.window
    assert last < n, "the study needs a short last chunk"

    # writing a window changes chunk bytes only, never the file's metadata
    copy = tmp_path / "copy.h5"
    shutil.copy(partial, copy)
    before = _metadata_hash(copy)
    with h5py.File(copy, "r") as h:
        rows = {k: np.zeros((n - last, *h[k].shape[1:]), h[k].dtype)
                for k in ("resid", "option_logprob", "answer_lse")}
    store.PartialFile(copy).write_rows(last, rows)
    assert _metadata_hash(copy) == before

    # tear the last (short) chunk of resid, as a kill in the middle of its write would:
    # HDF5 reads a partly overwritten chunk back, so the resumed write must reset it first
    _damage(partial, copy, "resid", n - 1)
    shutil.move(copy, partial)
    with h5py.File(partial, "r") as h, pytest.raises(OSError):
        h["resid"][n - 1]
    done = write_cache(_env(), tiny_model, out, OPTIONS)
    assert_same_data(good, done)


def _damage_text(src: Path, dst: Path, name: str, needle: bytes) -> int:
    """Copy ``src`` to ``dst`` with one stored copy of ``needle`` in ``name``'s text changed
    (same length); the row it changed."""
    data = src.read_bytes()
    with h5py.File(src, "r") as h:
        before = h[h5_name(h, name)][...]
    at = data.find(needle)
    while at >= 0:
        shutil.copy(src, dst)
        with open(dst, "r+b") as f:
            f.seek(at)
            f.write(needle.upper())
        with h5py.File(dst, "r") as h:
            after = h[h5_name(h, name)][...]
        changed = np.flatnonzero((before != after).reshape(before.shape[0], -1).any(1))
        if changed.size:
            return int(changed[0])
        at = data.find(needle, at + 1)
    raise AssertionError(f"{needle!r} not found in {name}")


@pytest.mark.parametrize("name, needle", [("probe", b"next-flip"), ("prompt", b"coin"),
                                          ("outcome_label", b"tails")])
def test_damaged_text_is_refused(good: Path, tmp_path: Path, name: str, needle: bytes) -> None:
    bad = tmp_path / "bad.h5"
    row = _damage_text(good, bad, name, needle)
    first = row // OPTIONS.window * OPTIONS.window
    expected = (f"{bad}: variable {name!r} rows {first}\u2013{first + OPTIONS.window - 1} "
                "are damaged (checksum mismatch)")
    with pytest.raises(CacheFileError) as e:
        ds = open_cache(bad)
        try:
            ds[name][row].values  # noqa: B018
        finally:
            ds.close()
    assert str(e.value) == expected
    r = CliRunner().invoke(app, ["info", "--verify", str(bad)])
    assert r.exit_code == 2 and _one_line(r.output) == f"error: {expected}"
    out = tmp_path / "report"
    r = CliRunner().invoke(app, ["analyze", str(bad), "--out", str(out), "--no-decoders"])
    assert r.exit_code == 2 and _one_line(r.output) == f"error: {expected}"
    assert not out.exists()
