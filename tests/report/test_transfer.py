"""``analyze --transfer``, ``--transfer-delivery`` and ``--own-answer`` on a tiny model's
studies: their sections on stdout and in report.md beside the untrained floors, figures, the
results file of every comparison (``--results``), and bad options refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import belieflens
from belieflens import results
from belieflens.cli.main import app

PARAMS: dict[str, Any] = {"turns": 2, "probes": "next-flip"}


@pytest.fixture(scope="module")
def files(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny model and two untrained networks on a study of 8 episodes (both deliveries)
    and on its paraphrase (the same seed)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("transfer")
    out = {}
    try:
        for cond, extra in (("std", {}), ("para", {"wording": "paraphrase"})):
            for init in (None, "random:0", "random:1"):
                name = f"{cond}-{(init or 'trained').replace(':', '')}"
                out[name] = belieflens.extract(
                    "coin-flip", params={**PARAMS, **extra}, model=str(tiny_dir),
                    out=d / f"{name}.h5", episodes=8, seed=0, init=init, threads=1,
                    kernels="default")
    finally:
        torch.set_num_threads(before)
    return out


def _floors(files: dict[str, Path], cond: str, opt: str = "--floor") -> list[str]:
    return [a for s in ("random0", "random1") for a in (opt, str(files[f"{cond}-{s}"]))]


def test_transfers_and_own_answer_beside_their_floors(
        files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(results.FOLDER_VARIABLE, str(tmp_path / "results"))
    out = tmp_path / "r"
    r = CliRunner().invoke(app, [
        "analyze", str(files["std-trained"]), "--out", str(out), "--no-html",
        *_floors(files, "std"), "--transfer", str(files["para-trained"]),
        *_floors(files, "para", "--transfer-floor"), "--own-answer", "--results", "tiny"])
    assert r.exit_code == 0, r.output
    title = "== Transfer decoders: wording=standard → wording=paraphrase =="
    assert title in r.stdout
    assert "== Own-answer decoders: where the model's own answer forms ==" in r.stdout
    assert "transfer (TVD to the oracle) against the larger of its floor" in r.stdout
    assert "own answer: next-flip (held-out R2) against" in r.stdout
    report = (out / "report.md").read_text()
    assert "## Transfer decoders: wording=standard → wording=paraphrase" in report
    assert "## Own-answer decoders" in report and "untrained seed 1" in report
    assert (out / "own-answer.png").is_file()
    assert any(p.name.startswith("transfer-") for p in out.iterdir())
    table = results.load(tmp_path / "results" / "tiny.json")
    names = [row[0] for row in table.rows]
    assert names == ["floor: logit-lens", "floor: decoder",
                     "transfer wording=standard → wording=paraphrase: transfer",
                     "transfer wording=standard → wording=paraphrase: within",
                     "own answer: next-flip"]
    assert all(len(row) == len(table.columns) for row in table.rows)
    assert "2 untrained networks" in table.header.note
    saved = json.loads((tmp_path / "results" / "tiny.json").read_text())
    assert saved["header"]["command"]


def test_a_transfer_between_deliveries_without_a_floor(files: dict[str, Path]) -> None:
    r = CliRunner().invoke(app, ["analyze", str(files["std-trained"]),
                                 "--transfer-delivery", "multi-turn:single-turn"])
    assert r.exit_code == 0, r.output
    assert "== Transfer decoders: multi-turn → single-turn ==" in r.stdout
    assert "transfer multi-turn → single-turn: held-out TVD" in r.stdout
    assert "baseline counts: transfer" in r.stdout


@pytest.mark.parametrize(("extra", "message"), [
    (["--transfer-delivery", "multi-turn"], "FROM:TO"),
    (["--transfer-delivery", "multi-turn:text"], "delivery 'text' is not in"),
    (["--transfer", "nowhere.h5"], "'--transfer' = 'nowhere.h5' is not allowed: no such file"),
    (["--results", "x"], "--results writes the comparisons beside untrained controls"),
    (["--own-answer", "--no-decoders"], "drop --no-decoders"),
])
def test_bad_options_are_one_line(files: dict[str, Path], extra: list[str],
                                  message: str) -> None:
    r = CliRunner().invoke(app, ["analyze", str(files["std-trained"]), *extra])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr


def test_a_control_without_its_pair_or_of_another_study(files: dict[str, Path],
                                                        tmp_path: Path) -> None:
    base = ["analyze", str(files["std-trained"]), "--out", str(tmp_path / "r"),
            *_floors(files, "std"), "--transfer", str(files["para-trained"])]
    r = CliRunner().invoke(app, [*base, "--transfer-floor", str(files["para-random0"])])
    assert r.exit_code == 2 and "no --transfer-floor file holds its network" in r.stderr
    r = CliRunner().invoke(app, [*base, "--transfer-floor", str(files["std-random0"])])
    assert r.exit_code == 2 and "is a control of none of the --transfer files" in r.stderr
    assert not (tmp_path / "r").exists()
    r = CliRunner().invoke(app, ["analyze", str(files["std-trained"]), "--transfer",
                                 str(files["para-trained"]), *_floors(files, "para",
                                                                      "--transfer-floor")])
    assert r.exit_code == 2 and "--transfer-floor needs --floor" in r.stderr
