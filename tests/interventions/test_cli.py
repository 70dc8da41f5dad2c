"""``belieflens intervene``: one library call per command, one-line errors with exit 2."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from belieflens.cli.intervene import app, parse_layers
from belieflens.cli.main import app as main_app
from belieflens.errors import ParameterError
from belieflens.readouts.render import SUMMARY, TEMPLATE
from belieflens.report.interventions import report

runner = CliRunner()


def _one_line_error(r: Any) -> str:
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return str(lines[0])


def test_a_study_without_needed_variables_is_refused(tiny_study: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.h5"
    with xr.open_dataset(tiny_study, engine="h5netcdf") as ds:
        ds.drop_vars(["input_ids"]).to_netcdf(broken, engine="h5netcdf", invalid_netcdf=True)
    for cmd in ("patch", "steer", "erase"):
        out = tmp_path / f"{cmd}.h5"
        line = _one_line_error(runner.invoke(app, [cmd, str(broken), "--out", str(out)]))
        assert "input_ids" in line
        assert not out.exists()


def test_misaligned_pair_is_refused_naming_it(tiny_study: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.h5"
    import shutil

    import h5py

    changed = tmp_path / "changed.h5"  # query 1 reads other option tokens
    shutil.copy(tiny_study, changed)
    with h5py.File(changed, "r+") as f:
        opt = f["option_ids"][1]
        f["option_ids"][1] = np.where(opt >= 0, opt + 1, opt)
    b = 1
    r = runner.invoke(app, ["patch", str(changed), "--out", str(out), "--pair", "5:5",
                            "--pair", f"0:{b}", "--pair", f"{b}:0"])
    line = _one_line_error(r)
    assert r.exit_code == 2
    assert f"pair 1 (base query 0, source query {b}) cannot be aligned by role" in line
    assert not out.exists()


def test_evidence_positions_without_evidence_spans_is_one_line(tiny_study: Path,
                                                               tmp_path: Path) -> None:
    """A study whose read-outs mark no evidence has no evidence set to patch: one line naming
    its environment, exit 2, nothing written."""
    import shutil

    import h5py

    bare = tmp_path / "bare.h5"
    shutil.copy(tiny_study, bare)
    with h5py.File(bare, "r+") as f:
        codes = f["context_span"][...]
        f["context_span"][...] = np.where((codes >= 1) | (codes == SUMMARY), TEMPLATE, codes)
    out = tmp_path / "p.h5"
    line = _one_line_error(runner.invoke(app, ["patch", str(bare), "--out", str(out),
                                               "--positions", "evidence"]))
    assert "--positions evidence" in line and "coin-flip" in line and not out.exists()


@pytest.mark.parametrize(("args", "fragment"), [
    (["--layers", "1-x"], "'--layers'"),
    (["--positions", "answer,nowhere"], "'--positions'"),
    (["--batch-size", "0"], "'--batch-size'"),
    (["--pair", "3"], "'--pair'"),
])
def test_bad_patch_options(args: list[str], fragment: str, tiny_study: Path,
                           tmp_path: Path) -> None:
    out = tmp_path / "p.h5"
    line = _one_line_error(runner.invoke(app, ["patch", str(tiny_study), "--out", str(out),
                                               *args]))
    assert fragment in line and not out.exists()


def test_unknown_model_is_one_line(tiny_study: Path, tmp_path: Path) -> None:
    line = _one_line_error(runner.invoke(app, ["erase", str(tiny_study), "--out",
                                               str(tmp_path / "e.h5"), "--model", "nope"]))
    assert "nope" in line


def test_intervene_is_a_belieflens_command() -> None:
    r = runner.invoke(main_app, ["intervene", "--help"])
    assert r.exit_code == 0 and all(c in r.output for c in ("patch", "steer", "erase"))


def test_parse_layers() -> None:
    assert parse_layers(None) is None and parse_layers("all") is None
    assert parse_layers("0,4,10-12") == (0, 4, 10, 11, 12)
    with pytest.raises(ParameterError):
        parse_layers("a")


def test_patch_and_erase_write_files_that_analyze_reads(
    tiny_model: Any, tiny_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every intervention loads its model through interventions.run.intervene
    mod = importlib.import_module("belieflens.interventions.run")
    monkeypatch.setattr(mod, "model_for", lambda model, study, **kw: tiny_model)
    out = tmp_path / "patch.h5"
    r = runner.invoke(app, ["patch", str(tiny_study), "--out", str(out), "--turn", "2",
                            "--layers", "0,2", "--quiet"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"wrote {out}"
    r = runner.invoke(main_app, ["analyze", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert "belief transfer" in r.output and "wrote" in r.output
    assert {f.name for f in (tmp_path / "rep").iterdir()} == {"patch_transfer.png", "report.md",
                                                              "intervention.html"}
    eout = tmp_path / "erase.h5"
    r = runner.invoke(app, ["erase", str(tiny_study), "--out", str(eout), "--layers", "2",
                            "--folds", "2", "--quiet"])
    assert r.exit_code == 0, r.output
    res = report(eout, tmp_path / "rep2")
    assert "toward the prior" in res.text and len(res.files) == 3
    with xr.open_dataset(eout, engine="h5netcdf") as ds:
        assert ds.attrs["kind"] == "intervention-erase"
        assert ds["erased_logprob"].dims == ("query", "layer", "option")


def test_sigterm_during_an_intervention_is_one_line_and_writes_nothing(
    tiny_model: Any, tiny_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command with no checkpoints of its own (here ``intervene patch``) stopped by SIGTERM
    says so in one line, exit 143, and leaves no result file, whole or partial."""
    import os
    import signal

    mod = importlib.import_module("belieflens.interventions.run")
    monkeypatch.setattr(mod, "model_for", lambda model, study, **kw: tiny_model)
    write: Callable[[xr.Dataset, Path], Path] = mod.write_result

    def sigterm_then_write(ds: xr.Dataset, out: Path) -> Path:
        os.kill(os.getpid(), signal.SIGTERM)
        return write(ds, out)

    monkeypatch.setattr(mod, "write_result", sigterm_then_write)
    out = tmp_path / "patch.h5"
    r = runner.invoke(app, ["patch", str(tiny_study), "--out", str(out), "--turn", "2",
                            "--layers", "0,2", "--quiet"])
    assert r.exit_code == 143, r.output
    assert r.output.strip() == "interrupted: stopped by SIGTERM"
    assert sorted(p.name for p in tmp_path.iterdir()) == []
