"""The README's walk-throughs run as written (so they cannot rot).

The blocks run here are the ones the README marks ``<!-- run by: tests/test_readme.py -->``:
the five-minute command-line walk-through (``bash``) and the Python walk-through. The docs'
Getting started page includes both from the README, so this is their test too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- run by: tests/test_readme.py -->"

pytestmark = pytest.mark.real_model  # extracts a small study on the embedded model


def marked_block(language: str) -> str:
    """The one ``language`` code block that the README marks as run by this test."""
    text = README.read_text(encoding="utf-8")
    found = re.findall(re.escape(MARKER) + r"\n```" + language + r"\n(.*?)```", text, flags=re.S)
    assert len(found) == 1, f"README marks {len(found)} {language} blocks for this test"
    return str(found[0])


def test_walkthrough_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict[str, object] = {}
    exec(compile(marked_block("python"), str(README), "exec"), namespace)
    assert (tmp_path / "study.h5").is_file()
    assert (tmp_path / "tvd_per_layer.png").stat().st_size > 1000
    beliefs = namespace["beliefs"]
    tvd = namespace["tvd"]
    import xarray as xr

    assert isinstance(beliefs, xr.DataArray) and isinstance(tvd, xr.DataArray)
    assert beliefs.dims == ("delivery", "probe", "episode", "turn", "outcome")
    assert tvd.dims == ("delivery", "probe", "episode", "turn", "layer")
    assert tvd.sizes["turn"] == 5 and tvd.sizes["layer"] == 31
    assert float(tvd.min()) >= 0.0 and float(tvd.max()) <= 1.0
    assert os.path.basename(str(namespace["path"])) == "study.h5"


def test_cli_walkthrough_runs(tmp_path: Path) -> None:
    """Every command of the CLI walk-through succeeds, in order, as a shell would run it."""
    env = dict(os.environ, MPLBACKEND="Agg",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", marked_block("bash")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "study.h5").is_file()
    assert (tmp_path / "report" / "report.md").is_file()
    for figure in ("trajectory.png", "lens_tvd.png"):
        assert (tmp_path / "report" / figure).stat().st_size > 1000
    assert "next-flip" in done.stdout and "TVD" in done.stdout  # analyze's tables
    assert "weights_hash" in done.stdout  # `belieflens info`: provenance
    assert "coin-flip" in done.stdout  # `belieflens envs` and `info` name it
    assert "ok: study.h5 passed every consistency check" in done.stdout
    assert "belieflens extract coin-flip" in done.stdout.splitlines()[-1]
