"""CLI: `belieflens lens train` input errors and `analyze --lens` checks (one line, exit 2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from belieflens.cli.main import app
from belieflens.lens.tuned import TunedLensConfig, identity_lens, save_tuned_lens

runner = CliRunner()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--envs", "roulette"], "unknown environment"),
        (["--vocab-top", "-1"], "'--vocab-top'"),
        (["--device", "tpu"], "'--device'"),
        (["--model", "nope"], "unknown model"),
        (["--epochs", "0"], "epochs"),
    ],
)
def test_bad_lens_train_input(args: list[str], fragment: str, tmp_path: Path) -> None:
    out = tmp_path / "lens"
    r = runner.invoke(app, ["lens", "train", *args, "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and fragment in r.output
    assert "Traceback" not in r.output and not out.exists()


def test_existing_lens_is_not_overwritten(tmp_path: Path) -> None:
    cfg = TunedLensConfig("m", "r", "w", "u", n_layers=2, d_model=3, vocab_size=5)
    folder = save_tuned_lens(identity_lens(cfg), tmp_path / "lens")
    before = (folder / "config.json").read_text()
    r = runner.invoke(app, ["lens", "train", "--out", str(folder)])
    assert r.exit_code == 2 and "--overwrite" in r.output
    assert (folder / "config.json").read_text() == before


def _cache_stub(path: Path, weights_hash: str) -> Path:
    """A minimal complete cache file with a given weights hash (only attrs are checked first)."""
    import xarray as xr

    from belieflens.store.file import REQUIRED, SCHEMA, SCHEMA_VERSION

    def zeros(name: str) -> np.ndarray:
        spec = SCHEMA[name]
        shape = (1,) * len(spec.dims)
        if spec.dtype == "str":
            return np.full(shape, "x", dtype=object)
        return np.zeros(shape, dtype="f8" if spec.dtype == "resid" else spec.dtype)

    data = {n: (SCHEMA[n].dims, zeros(n)) for n in REQUIRED}
    xr.Dataset(data, attrs={"schema_version": SCHEMA_VERSION, "status": "complete",
                            "weights_hash": weights_hash, "model_id": "other-model"}
               ).to_netcdf(path, engine="h5netcdf")
    return path


def test_analyze_refuses_a_lens_of_another_model(tmp_path: Path) -> None:
    cfg = TunedLensConfig("m", "r", "a" * 64, "u", n_layers=2, d_model=3, vocab_size=5)
    folder = save_tuned_lens(identity_lens(cfg), tmp_path / "lens")
    f = _cache_stub(tmp_path / "c.h5", "b" * 64)
    r = runner.invoke(app, ["analyze", str(f), "--lens", f"tuned:{folder}"])
    assert r.exit_code == 2 and "does not fit this cache file" in r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize("spec", ["logit", "tuned:/no/such/folder"])
def test_analyze_bad_lens_spec(spec: str, tmp_path: Path) -> None:
    f = _cache_stub(tmp_path / "c.h5", "b" * 64)
    r = runner.invoke(app, ["analyze", str(f), "--lens", spec])
    assert r.exit_code == 2 and r.output.startswith("error: ")
    assert ("'--lens'" in r.output) or ("lacks" in r.output)


def test_corrupt_lens_config(tmp_path: Path) -> None:
    cfg = TunedLensConfig("m", "r", "a" * 64, "u", n_layers=2, d_model=3, vocab_size=5)
    lens = identity_lens(cfg)
    bad = dataclasses.replace(lens, bias=np.zeros((2, 4), np.float32))
    folder = save_tuned_lens(bad, tmp_path / "lens")
    f = _cache_stub(tmp_path / "c.h5", "a" * 64)
    r = runner.invoke(app, ["analyze", str(f), "--lens", f"tuned:{folder}"])
    assert r.exit_code == 2 and "do not match" in r.output
