"""``belieflens gates``: a frozen gate file run end to end on the tiny model and a tiny adapter
(the read-outs it was taught left out and counted); a gate file edited after its freeze, an
adapter taught again since, or a condition with nothing held out: one line, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import xarray as xr
from typer.testing import CliRunner

from belieflens.cli.main import app
from belieflens.envs import get
from belieflens.envs.coin_flip.env import CoinFlip, draw_episode
from belieflens.train.gate_run import weights_sha256
from belieflens.train.teach import TRAIN_SEED_OFFSET, TeachConfig, teach

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()


@pytest.fixture(scope="module")
def adapter(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model taught one step on one episode of one flip."""
    config = TeachConfig(env="coin-flip", env_params=(("turns", 1), ("probes", "next-flip")),
                         model=str(tiny_dir), episodes=1, steps=1, batch=1, rank=2, alpha=4.0,
                         layers=(1,), lr=1e-2, warmup=0)
    return teach(config, tmp_path_factory.mktemp("taught") / "adapter").path


def _repo(tmp_path: Path, text: str) -> Path:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c",
                        "user.email=t@t", *args], check=True, capture_output=True)

    git("init", "-q")
    path = tmp_path / "gates.toml"
    path.write_text(text)
    git("add", "gates.toml")
    git("commit", "-qm", "freeze the gates")
    return path


def _file(tiny_dir: Path, adapter: Path, seed: int, sha: str | None = None) -> str:
    return f"""
name = "tiny gates"
env = "coin-flip"
probe = "next-flip"
seed = {seed}
params = {{ probes = "next-flip" }}
[models.base]
model = "{tiny_dir}"
[models.taught]
model = "{adapter}"
weights_sha256 = "{sha if sha is not None else weights_sha256(adapter)}"
[conditions.short]
params = {{ turns = 1 }}
episodes = 6
[conditions.named]
params = {{ turns = 2, sides = "random" }}
episodes = 3
[[gate]]
model = "taught"
conditions = ["short", "named"]
tvd_oracle = "<= 1.0"
[[report]]
model = "base"
conditions = "all"
slope = "< 0.3"
"""


def test_a_frozen_gate_file_runs_and_counts_what_it_leaves_out(
        tiny_dir: Path, adapter: Path, tmp_path: Path) -> None:
    path = _repo(tmp_path, _file(tiny_dir, adapter, seed=40))
    out = tmp_path / "out"
    result = runner.invoke(app, ["gates", str(path), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "frozen at" in result.output and "every gate met" in result.output
    m = xr.open_dataset(out / "measures.nc", engine="h5netcdf")
    assert set(m["model"].values) == {"base", "taught"}
    assert set(m["condition"].values) == {"short", "named"}
    # turn 0 of the heads/tails condition is the taught prompt, and so is one of its flips
    short = m.sel(condition="short", model="taught")
    assert int(short["dropped"]) > 0 and int(short["kept"]) > 0
    assert int(m.sel(condition="named", model="taught")["dropped"]) == 0
    assert (m["dropped"].sel(model="base") == m["dropped"].sel(model="taught")).all()
    assert (out / "verdicts.json").is_file()


def test_an_edited_gate_file_is_refused(tiny_dir: Path, adapter: Path, tmp_path: Path) -> None:
    path = _repo(tmp_path, _file(tiny_dir, adapter, seed=40))
    path.write_text(path.read_text().replace("<= 1.0", "<= 2.0"))
    result = runner.invoke(app, ["gates", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "edited after its freeze commit" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_adapter_taught_again_is_refused(tiny_dir: Path, adapter: Path,
                                            tmp_path: Path) -> None:
    path = _repo(tmp_path, _file(tiny_dir, adapter, seed=40, sha="0" * 64))
    result = runner.invoke(app, ["gates", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "is not the adapter" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_condition_with_nothing_held_out_is_one_line(tiny_dir: Path, adapter: Path,
                                                       tmp_path: Path) -> None:
    """One episode of one flip that lands as the taught episode's did: every read-out taught."""
    env = get("coin-flip", turns=1, probes="next-flip")
    assert isinstance(env, CoinFlip)
    taught = draw_episode(env.params, TRAIN_SEED_OFFSET, 0).flips
    seed = next(s for s in range(1, 100) if draw_episode(env.params, s, 0).flips == taught)
    text = _file(tiny_dir, adapter, seed=seed).replace("episodes = 6", "episodes = 1")
    path = _repo(tmp_path, text)
    result = runner.invoke(app, ["gates", str(path), "--out", str(tmp_path / "out"),
                                 "--quiet"])
    assert result.exit_code == 2, result.output
    assert "nothing is held out" in result.output
    assert len(result.output.strip().splitlines()) == 1
