"""The README's Python walk-through runs as written (so it cannot rot)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

pytestmark = pytest.mark.real_model  # extracts a small study on the embedded model


def python_block() -> str:
    """The first ``python`` code block under the README's "## Python" heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert found is not None, "README's Python section has no python code block"
    return found.group(1)


def test_walkthrough_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict[str, object] = {}
    exec(compile(python_block(), str(README), "exec"), namespace)
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
