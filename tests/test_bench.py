"""The benchmarks are run as modules of the ``bench`` package and their README lists each.

``python -m bench.NAME`` from the repository root finds ``bench._lib`` without editing
``sys.path``; a script that spawns itself does so with ``-m`` too. ``bench/README.md``'s
table has a row for every script.
"""

from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 10


def test_no_script_edits_the_import_path() -> None:
    for path in [*SCRIPTS, BENCH / "_lib.py"]:
        text = path.read_text("utf-8")
        assert "sys.path" not in text, path.name
        assert not re.search(r"sys\.executable,\s*__file__", text), path.name


def test_the_readme_lists_every_script_and_runs_it_as_a_module() -> None:
    readme = (BENCH / "README.md").read_text("utf-8")
    rows = {m[1] for m in re.finditer(r"^\| `([a-z_]+\.py)` \|", readme, re.M)}
    assert rows == {p.name for p in SCRIPTS}
    assert not re.search(r"python bench/|`bench/[a-z_]+\.py [-A-Z]", readme)
    for path in SCRIPTS:
        assert f"python -m bench.{path.stem}" in readme, path.stem
