"""The benchmarks are run as modules of the ``bench`` package and their README lists each.

``python -m bench.NAME`` from the repository root finds ``bench._lib`` without editing
``sys.path``; a script that spawns itself does so with ``-m`` too. ``bench/README.md``'s
table has a row for every script.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


def test_a_scripts_last_line_becomes_a_results_table(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``--results NAME`` writes the ``key=value`` figures of a script's last line, one row
    each, with the command line in the header; without it nothing is written."""
    import argparse

    from belieflens import results
    from bench._lib import add_results_option, start_results, write_line_results

    monkeypatch.setenv(results.FOLDER_VARIABLE, str(tmp_path))
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=3)
    add_results_option(ap)
    assert start_results(ap.parse_args([])) is None
    args = ap.parse_args(["--results", "toy-train"])
    recorder = start_results(args)
    write_line_results(recorder, args.results, "trainer_tok_s=3873 plain_tok_s=3614 ratio=1.07")
    found = results.load(tmp_path / "toy-train.json")
    assert found.rows == (("trainer_tok_s", "3873"), ("plain_tok_s", "3614"), ("ratio", "1.07"))
    assert found.header.threads == "3" and found.header.missing() == []


@pytest.mark.parametrize(("condition", "by", "says"), [
    ("in-distribution", "prior", "not there (run the gates into"),
    ("no-such", "prior", "condition 'no-such' is not in"),
    ("new-sides", "prior", "does not set 'prior'"),
])
def test_a_gate_breakdown_without_its_run_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], condition: str, by: str,
        says: str) -> None:
    """Bad input: no gate run in ``--out``, an unknown condition, a factor the condition does
    not set; each one line on stderr, exit 2, nothing written."""
    from bench.gate_breakdown import main

    with pytest.raises(SystemExit) as e:
        main(["gates/coin-flip-teaching.toml", "--out", str(tmp_path / "run"),
              "--condition", condition, "--by", by])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()
