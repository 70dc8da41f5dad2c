"""Results files (``belieflens.results``): the header a command records, the Markdown beside
its JSON, and what a bad call does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from belieflens import results


def test_a_file_records_its_command_commit_machine_and_wall_time(tmp_path: Path) -> None:
    rec = results.start("make demo", threads=3, gpu="NVIDIA H100", folder=tmp_path)
    md = rec.write("demo", ["model", "TVD"], [["smollm2-135m", 0.125], ["x | y", "0.5"]],
                   note="a note", data={"raw": [1.0, 2.0]})
    assert md == tmp_path / "demo.md"
    found = results.load(tmp_path / "demo.json")
    h = found.header
    assert h.missing() == []
    assert (h.command, h.threads, h.gpu, h.note) == ("make demo", "3", "NVIDIA H100", "a note")
    assert h.wall.endswith(" s") and float(h.wall[:-2].replace(",", "")) >= 0
    assert h.memory.endswith(" GiB") and h.cpu
    assert h.commit == results.commit()
    assert found.rows == (("smollm2-135m", "0.125"), ("x | y", "0.5"))
    assert found.data == {"raw": [1.0, 2.0]}
    text = md.read_text("utf-8")
    assert text == found.markdown()
    assert text.splitlines()[0] == results.MARK
    assert "| x \\| y | 0.5 |" in text  # a pipe inside a cell is escaped
    assert "- **command**: `make demo`" in text and "GPU: NVIDIA H100" in text


def test_rewriting_replaces_both_files_whole(tmp_path: Path) -> None:
    rec = results.start("make demo", threads=1, folder=tmp_path)
    rec.write("t", ["a"], [["1"], ["2"]])
    rec.write("t", ["a"], [["3"]])
    assert results.load(tmp_path / "t.json").rows == (("3",),)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.md"]


def test_a_row_of_the_wrong_length_is_refused_and_nothing_written(tmp_path: Path) -> None:
    rec = results.start("make demo", threads=1, folder=tmp_path)
    with pytest.raises(ValueError, match=r"rows \[1\] do not have 2 cells"):
        rec.write("t", ["a", "b"], [["1", "2"], ["3"]])
    assert not any(tmp_path.iterdir())


def test_load_names_what_a_file_lacks(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"header": {"command": "make demo"}}), "utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: header lacks commit, date, cpu"):
        results.load(bad)
    bad.write_text("[]", "utf-8")
    with pytest.raises(ValueError, match="not a results file"):
        results.load(bad)


def test_the_command_is_the_make_target_or_the_process_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(results.COMMAND_VARIABLE, "make toy-seeds")
    assert results.command_line() == "make toy-seeds"
    monkeypatch.delenv(results.COMMAND_VARIABLE)
    code = "from belieflens import results; print(results.command_line())"
    (tmp_path / "probe.py").write_text(code, "utf-8")
    done = subprocess.run([sys.executable, "-m", "probe", "--seeds", "0 1"], cwd=tmp_path,
                          capture_output=True, text=True, check=True,
                          env={**os.environ,
                               "PYTHONPATH": f"{tmp_path}:{Path(__file__).parents[1]}"})
    assert done.stdout.strip() == "python -m probe --seeds '0 1'"


def test_the_folder_and_threads_default_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(results.FOLDER_VARIABLE, str(tmp_path / "r"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rec = results.start("make demo")
    assert rec.folder == tmp_path / "r" and rec.threads == 1
    monkeypatch.delenv(results.FOLDER_VARIABLE)
    assert results.results_folder() == Path("docs/results")


def test_the_commit_outside_a_checkout_says_so(tmp_path: Path) -> None:
    assert results.commit(tmp_path).startswith("unknown")
