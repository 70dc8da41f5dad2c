"""Floors: a study beside untrained controls of the same study (tiny model and coin-toy):
the trained value, the floor over seeds and the selectivity with its bootstrap interval per
layer and source, a verdict per source, and a control of another study refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import belieflens
from belieflens.analysis.floor import check_floor, format_floor, verdicts
from belieflens.cli.main import app
from belieflens.envs import readout_targets
from belieflens.errors import ParameterError

PARAMS = {"turns": 2, "delivery": "multi-turn"}


def _extract(model: str, out: Path, init: str | None, env: str = "coin-flip",
             params: dict[str, Any] | None = None, episodes: int = 4, seed: int = 0) -> Path:
    return belieflens.extract(env, params=PARAMS if params is None else params, model=model,
                              out=out, episodes=episodes, seed=seed, init=init, threads=1,
                              kernels="default")


@pytest.fixture(scope="module")
def lm_study(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    """A tiny-model coin-flip study and two untrained controls of it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        d = tmp_path_factory.mktemp("floor")
        return tuple(_extract(str(tiny_dir), d / f"{n}.h5", init)
                     for n, init in (("t", None), ("r0", "random:0"), ("r1", "random:1")))
    finally:
        torch.set_num_threads(before)


def test_floor_of_a_language_model_study(lm_study: tuple[Path, ...]) -> None:
    study, *controls = lm_study
    with belieflens.open_cache(study) as ds:
        f = ds.bl.floor(controls)
    assert f["selectivity"].dims == ("source", "layer")
    assert f["control_value"].dims == ("source", "control", "layer")
    assert list(f["source"].values) == ["logit-lens", "decoder"]
    assert list(f["control"].values) == ["untrained seed 0", "untrained seed 1"]
    assert f["seed"].values.tolist() == [0, 1]
    assert np.allclose(f.floor_mean, f.control_value.mean("control"))
    assert bool((f.floor_min <= f.floor_mean).all() and (f.floor_mean <= f.floor_max).all())
    tvd = f.sel(source="decoder")
    assert np.allclose(tvd.selectivity, tvd.floor_mean - tvd.trained)  # positive = better
    ok = np.isfinite(tvd.selectivity_low)
    assert bool((tvd.selectivity_low[ok] <= tvd.selectivity_high[ok]).all())
    assert np.array_equal(tvd.exceeds, tvd.selectivity_low > 1e-6)
    lines = verdicts(f)
    assert len(lines) == 2 and all(("beyond its floor" in x) for x in lines)
    assert "selectivity" in format_floor(f)


def test_a_control_of_another_study_is_one_line(lm_study: tuple[Path, ...], tiny_dir: Path,
                                                tmp_path: Path, one_thread: None) -> None:
    study, control, _ = lm_study
    other = _extract(str(tiny_dir), tmp_path / "other.h5", "random:0", episodes=3)
    with belieflens.open_cache(study) as ds, belieflens.open_cache(other) as o:
        with pytest.raises(ParameterError, match="its episodes differs") as e:
            check_floor(ds.attrs, o.attrs, "other.h5")
        assert "\n" not in str(e.value)
        attrs = dict(o.attrs, episodes=ds.attrs["episodes"], model_id="someone/else")
        with pytest.raises(ParameterError, match="model architecture differs"):
            check_floor(ds.attrs, attrs, "x.h5")
        with pytest.raises(ParameterError, match="own weights"):
            check_floor(ds.attrs, ds.attrs, "study.h5")
    out = tmp_path / "report"
    r = CliRunner().invoke(app, ["analyze", str(study), "--floor", str(control), "--floor",
                                 str(other), "--out", str(out)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "other.h5 is another study: its episodes differs" in lines[0]
    assert not out.exists()


def test_analyze_prints_the_floor(lm_study: tuple[Path, ...], tmp_path: Path) -> None:
    study, *controls = lm_study
    args = ["analyze", str(study), "--out", str(tmp_path / "r"), "--no-html"]
    for c in controls:
        args += ["--floor", str(c)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "== Floors: each read-out beside untrained controls ==" in r.stdout
    assert "decoder (TVD to the oracle)" in r.stdout
    assert (tmp_path / "r" / "floor.png").is_file()
    assert "untrained seed 1" in (tmp_path / "r" / "report.md").read_text()


def test_the_coin_toys_floor_per_target(tmp_path: Path, one_thread: None) -> None:
    """coin-toy beside two untrained seeds of its shape: the posterior mean is read by the
    untrained networks too (its floor is high), the full posterior over bins is not."""
    paths = [_extract("coin-toy", tmp_path / f"{n}.h5", init, env="coin-tokens", params={},
                      episodes=40)
             for n, init in (("t", None), ("r0", "random:0"), ("r1", "random:1"))]
    with belieflens.open_cache(paths[0]) as ds:
        targets = readout_targets(ds)
        assert list(targets) == ["posterior mean", "posterior over bins", "posterior variance"]
        f = ds.bl.floor(paths[1:], targets=targets, decoders=False)
    mean = f.sel(source="geometry: posterior mean")
    assert float(mean.floor_mean.max()) > 0.9  # an untrained network reads the mean too
    bins = f.sel(source="geometry: posterior over bins")
    assert float(bins.trained_all) > 0.9
    assert float(bins.selectivity_all) > 0.1 and float(bins.selectivity_low_all) > 0


def test_compare_sets_each_model_beside_its_controls(lm_study: tuple[Path, ...],
                                                     tmp_path: Path) -> None:
    study, *controls = lm_study
    out = tmp_path / "cmp"
    r = CliRunner().invoke(app, ["compare", str(study), *map(str, controls), "--out", str(out),
                                 "--no-probes"])
    assert r.exit_code == 0, r.output
    cmp = belieflens.compare([study, *controls], decoders=False)
    names = [str(m) for m in cmp["model"].values]
    assert names[1:] == [f"{names[0]} (untrained seed 0)", f"{names[0]} (untrained seed 1)"]
    assert cmp["init"].values.tolist() == ["trained", "random", "random"]
    assert cmp["floor_selectivity"].dims == ("model", "readout", "depth")
    lens = cmp.sel(model=names[0], readout="logit-lens")
    assert bool(lens.floor_trained.notnull().all())
    assert bool(cmp["floor_trained"].sel(model=names[1]).isnull().all())  # a control has none
    assert np.allclose(lens.floor_selectivity, lens.floor_mean - lens.floor_trained)
    assert "logit-lens TVD per layer" in r.stdout and "beyond its floor" in r.stdout
    assert (out / "compare_floor.png").is_file()
    assert "Beside untrained networks" in (out / "compare.md").read_text()


def test_untrained_controls_are_the_floor_of_every_model_of_their_shape() -> None:
    """A taught adapter (same architecture, other weights) gets its base's random controls,
    not the shuffled ones made from the base's weights; another shape gets none."""
    from belieflens.analysis.compare_floor import controls_of

    shape = {"model_id": "org/m", "model_n_layers": np.array([4]), "model_d_model": np.array([8])}
    base = {**shape, "weights_hash": "b"}
    taught = {**shape, "weights_hash": "t"}
    other = {**shape, "model_n_layers": np.array([6]), "weights_hash": "o"}
    rand = {**shape, "model_init": "random", "model_base_weights_hash": "b", "weights_hash": "r"}
    shuf = {**shape, "model_init": "shuffled", "model_base_weights_hash": "b",
            "weights_hash": "s"}
    assert controls_of([base, taught, other, rand, shuf]) == {0: [3, 4], 1: [3]}
