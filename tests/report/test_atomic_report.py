"""Reports written whole or not at all: a failed ``analyze --out`` leaves the previous report.

The report is staged beside ``--out`` and moved into place once whole
(:mod:`belieflens.report.atomic`). A full disk (ENOSPC raised by a figure, and a real 32 kB
tmpfs) and SIGTERM (a real signal, mid-report) each give one line, leave the previous
report byte for byte and no staging folder behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from belieflens.cli.main import app
from belieflens.report import analysis as report_analysis
from belieflens.store import space
from tests.smallfs import leftovers, small_fs


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _analyze(study: Path, out: Path) -> Any:
    return CliRunner().invoke(app, ["analyze", str(study), "--out", str(out), "--no-decoders",
                                    "--no-html"])


@pytest.fixture(scope="module")
def previous(viewer_study: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished report of the tiny study."""
    out = tmp_path_factory.mktemp("previous") / "report"
    r = _analyze(viewer_study, out)
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("fault", ["ENOSPC", "SIGTERM"])
def test_a_failed_analyze_leaves_the_previous_report_untouched(
    viewer_study: Path, previous: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    out = tmp_path / "report"
    shutil.copytree(previous, out)
    (out / "study.h5").write_bytes(b"a file the user keeps beside the report")
    before = _snapshot(out)
    assert "report.md" in before and "layers.png" in before

    def failing(*a: Any, **k: Any) -> Path:  # after three figures were staged
        if fault == "ENOSPC":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("the signal did not stop the report")

    monkeypatch.setattr(report_analysis, "layer_profile_plot", failing)
    r = _analyze(viewer_study, out)
    kept = "the previous report, if any, is untouched"
    if fault == "ENOSPC":
        assert r.exit_code == 2
        line = (f"error: no space left on {space.mount_point(out)} while writing the report "
                f"into {out}; free space and rerun ({kept})")
    else:
        assert r.exit_code == 143
        line = f"interrupted: stopped by SIGTERM: no report written into {out} ({kept})"
    assert r.stderr.strip() == line
    assert "Traceback" not in r.output
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no staging folder
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_report_replaces_the_previous_one_whole(
    viewer_study: Path, previous: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    shutil.copytree(previous, out)
    (out / "report.md").write_text("an older report")
    (out / "notes.txt").write_text("kept")
    r = _analyze(viewer_study, out)
    assert r.exit_code == 0, r.output
    assert (out / "report.md").read_bytes() == (previous / "report.md").read_bytes()
    assert (out / "notes.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_full_disk_during_analyze(viewer_study: Path, tmp_path: Path) -> None:
    with small_fs(tmp_path / "small", "32k") as fs:
        out = fs / "report"
        r = _analyze(viewer_study, out)
        assert r.exit_code == 2
        assert r.stderr.strip() == (
            f"error: no space left on {fs} while writing the report into {out}; free space "
            "and rerun (the previous report, if any, is untouched)")
        assert leftovers(fs) == []


def test_no_probes_is_the_deprecated_spelling_of_no_decoders(viewer_study: Path,
                                                             tmp_path: Path) -> None:
    """``--no-probes`` still skips the decoders, with one warning line; ``--no-decoders``
    warns of nothing."""
    args = ["analyze", str(viewer_study), "--out", str(tmp_path / "old"), "--no-html"]
    old = CliRunner().invoke(app, [*args, "--no-probes"])
    assert old.exit_code == 0, old.output
    assert old.stderr.count("--no-probes is deprecated") == 1
    assert "Linear decoders were skipped" in (tmp_path / "old" / "report.md").read_text()
    new = _analyze(viewer_study, tmp_path / "new")
    assert new.exit_code == 0, new.output
    assert "deprecated" not in new.stderr
    assert (tmp_path / "new" / "report.md").read_text() == (
        tmp_path / "old" / "report.md").read_text().replace(
        str(tmp_path / "old"), str(tmp_path / "new"))
