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
        main(["gates/coin-flip-teaching-2.toml", "--out", str(tmp_path / "run"),
              "--condition", condition, "--by", by])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_teaching_an_adapter_into_a_file_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``bench.teach_ship`` with an adapter folder that is a file: one line on stderr, exit 2,
    the file untouched (a run a signal stops is one line too: ``interrupted: ...``)."""
    from bench.teach_ship import main

    taken = tmp_path / "smollm2-135m-bayes"
    taken.write_text("mine")
    with pytest.raises(SystemExit) as e:
        main(["smollm2-135m-bayes", "--dest", str(tmp_path), "--steps", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "is a file" in err and err.count("\n") == 1
    assert taken.read_text() == "mine"


def test_the_recipe_table_puts_each_readings_base_and_snapshot_side_by_side(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``bench.recipe_table`` reads two validation readings (results files) into one row per
    base and step-440 line, multi-turn / single-turn in each cell; a reading without that
    snapshot, or a missing file, is one line on stderr and exit 2."""
    from belieflens import results
    from bench.recipe_table import main

    monkeypatch.setenv(results.FOLDER_VARIABLE, str(tmp_path))
    columns = ["model", "condition", "delivery", "slope ± SE", "TVD to oracle",
               "TVD to target", "step R²"]

    def reading(name: str, tvd: float, step: int) -> None:
        rows = [[model, c, d, f"{slope:.3f} ± 0.010", f"{tvd * k:.4f}", "0", "0"]
                for model, slope, k in (("base", 0.05, 2.0),
                                        (f"smollm2-135m-bayes step-{step:05d} (training "
                                         "loss 0.05)", 0.9, 1.0))
                for c in ("new-priors", "in-distribution", "new-sides")
                for d in ("multi-turn", "single-turn")]
        results.start("python -m bench.teach_curve", threads=1,
                      folder=tmp_path).write(name, columns, rows)

    reading("curve-a", 0.1, 440)
    reading("curve-b", 0.05, 440)
    main(["A=curve-a", "B=curve-b", "--results", "table"])
    found = results.load(tmp_path / "table.json")
    assert [r[:3] for r in found.rows] == [
        ("A", "base", "0.2000 / 0.2000"), ("A", "step-00440", "0.1000 / 0.1000"),
        ("B", "base", "0.1000 / 0.1000"), ("B", "step-00440", "0.0500 / 0.0500")]
    assert found.rows[1][3] == "0.900 / 0.900"
    reading("curve-c", 0.1, 880)
    for argv, says in ((["C=curve-c"], "curve-c.json has no line for step-00440"),
                       (["D=curve-d"], "no results file")):
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1


def test_the_curve_by_turn_says_where_on_an_episode_a_model_misses() -> None:
    import numpy as np
    import xarray as xr

    from bench.teach_curve import TURN_BINS, tvd_by_turn

    # one episode of 6 turns: the belief misses by 0.1 before any flip, by 0.2 after 1-3 flips
    # and by 0.3 after 4 or more; the other delivery by 0.05 throughout
    miss = np.array([[0.1, 0.2, 0.2, 0.2, 0.3, 0.3], [0.05] * 6])
    oracle = np.full((2, 1, 1, 6), 0.5)
    stacked = np.stack([oracle + miss[:, None, None], 1 - oracle - miss[:, None, None]], -1)
    dims = ("delivery", "probe", "episode", "turn", "outcome")
    b = xr.Dataset({"belief": (dims, stacked),
                    "oracle": (dims, np.stack([oracle, 1 - oracle], -1))},
                   coords={"delivery": ["multi-turn", "single-turn"], "probe": ["next-flip"]})
    found = tvd_by_turn(b, "next-flip")
    assert len(TURN_BINS) == 3
    assert found["multi-turn"] == pytest.approx([0.1, 0.2, 0.3])
    assert found["single-turn"] == pytest.approx([0.05, 0.05, 0.05])
