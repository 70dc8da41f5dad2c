"""``belieflens teach``: bad input is one line, exit 2, and nothing written; an adapter
folder is a model (``--model DIR``), refused where its base differs or at its training seed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from belieflens.cli.main import app
from belieflens.train.teach import TRAIN_SEED_OFFSET

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()


def run(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args)
    return result.exit_code, result.output


@pytest.mark.parametrize("args, fragment", [
    (["dutch-book"], "no option-level oracle"),
    (["coin-flip", "--temper", "0"], "'--temper' = 0.0"),
    (["coin-flip", "--temper", "-2"], "'--temper' = -2.0"),
    (["coin-flip", "--temper", "abc"], "'--temper' = 'abc'"),
    (["dice", "--temper", "0.5"], "'--temper' is not allowed for 'dice'"),
    (["coin-flip", "--layers", "2"], "'--layers' = 2 is not allowed: the model has blocks 0..1"),
    (["coin-flip", "--layers", "x"], "'--layers' = 'x'"),
    (["coin-flip", "--steps", "0"], "'--steps' = 0"),
])
def test_bad_input_is_one_line_and_writes_nothing(args: list[str], fragment: str,
                                                  tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "adapter"
    code, output = run(["teach", *args, "--model", str(tiny_dir), "--out", str(out),
                        "--set" if args[0] == "coin-flip" else "--episodes",
                        "turns=1" if args[0] == "coin-flip" else "1"])
    assert code == 2, output
    assert fragment in output and len(output.strip().splitlines()) == 1, output
    assert not out.exists()


def fake_adapter(folder: Path, **base: object) -> None:
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"")
    (folder / "teach.json").write_text(json.dumps({
        "kind": "belieflens teach", "base": base, "env": "coin-flip", "fingerprint": "x",
        "training_episodes": {"seed": TRAIN_SEED_OFFSET}}))


def test_an_out_folder_of_another_run_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    fake_adapter(other, spec="smollm2-135m")
    before = sorted(p.name for p in other.iterdir())
    code, output = run(["teach", "coin-flip", "--model", str(tiny_dir), "--out", str(other)])
    assert code == 2 and "holds an adapter over 'smollm2-135m'" in output, output
    same_base = tmp_path / "same"
    fake_adapter(same_base, spec=str(tiny_dir))
    code, output = run(["teach", "coin-flip", "--model", str(tiny_dir), "--out",
                        str(same_base)])
    assert code == 2 and "holds another teach run" in output, output
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "notes.txt").write_text("mine")
    code, output = run(["teach", "coin-flip", "--model", str(tiny_dir), "--out",
                        str(tmp_path / "files")])
    assert code == 2 and "holds no teach run" in output, output
    assert sorted(p.name for p in other.iterdir()) == before
    assert (tmp_path / "files" / "notes.txt").read_text() == "mine"


def test_an_adapter_over_another_base_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    fake_adapter(folder, spec=str(tiny_dir), weights_hash="0" * 64, official_id="tiny")
    out = tmp_path / "x.h5"
    code, output = run(["extract", "coin-flip", "--set", "turns=1", "--episodes", "1",
                        "--model", str(folder), "--out", str(out)])
    assert code == 2 and "not the same base" in output, output
    assert not out.exists()


def test_an_adapter_is_not_evaluated_on_its_training_episodes(tiny_dir: Path,
                                                               tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    fake_adapter(folder, spec=str(tiny_dir), weights_hash="0" * 64, official_id="tiny")
    code, output = run(["extract", "coin-flip", "--episodes", "1", "--seed",
                        str(TRAIN_SEED_OFFSET), "--model", str(folder), "--out",
                        str(tmp_path / "x.h5")])
    assert code == 2 and "taught on the episodes of that seed" in output, output


def test_an_untrained_control_of_an_adapter_is_refused(tiny_dir: Path,
                                                        tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    fake_adapter(folder, spec=str(tiny_dir), weights_hash="0" * 64, official_id="tiny")
    out = tmp_path / "x.h5"
    code, output = run(["extract", "coin-flip", "--set", "turns=1", "--episodes", "1",
                        "--model", str(folder), "--init", "random:0", "--out", str(out)])
    assert code == 2 and len(output.strip().splitlines()) == 1, output
    assert "'--init' = 'random:0' is not allowed with the taught adapter" in output, output
    assert not out.exists() and not list(tmp_path.glob("x.h5*"))


def test_teach_writes_an_adapter_that_is_a_model(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "adapter"
    code, output = run(["teach", "coin-flip", "--set", "turns=1", "--model", str(tiny_dir),
                        "--out", str(out), "--episodes", "1", "--steps", "2", "--batch", "1",
                        "--rank", "2", "--layers", "1", "--temper", "0.5"])
    assert code == 0, output
    assert f"wrote {out}" in output and "final KL" in output
    info = json.loads((out / "teach.json").read_text())
    assert info["options"]["temper"] == 0.5 and info["options"]["env_params"] == {"turns": 1}
    code, output = run(["extract", "coin-flip", "--set", "turns=1", "--episodes", "1",
                        "--model", str(out), "--out", str(tmp_path / "x.h5"), "--quiet"])
    assert code == 0, output
    shutil.rmtree(out)


def test_models_lists_the_shipped_adapters() -> None:
    code, output = run(["models"])
    assert code == 0
    assert "smollm2-135m-bayes " in output and "smollm2-135m-bayes-0.3" in output
