"""Floors: a study beside untrained controls of the same study (tiny model and coin-toy):
the trained value, the floor over seeds, the statistic baselines and the selectivity with its
corrected interval per layer and source, a verdict per source; an untrained network beside
other untrained networks flags no layer (null against null); a control of another study, too
few controls or too few episodes refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import belieflens
from belieflens.analysis.floor import Readout, check_floor, readouts
from belieflens.cli.main import app
from belieflens.envs import readout_targets, statistic_features
from belieflens.errors import ParameterError
from belieflens.report.floor import format_floor, verdicts

PARAMS = {"turns": 2, "delivery": "multi-turn"}


def _extract(model: str, out: Path, init: str | None, env: str = "coin-flip",
             params: dict[str, Any] | None = None, episodes: int = 8, seed: int = 0) -> Path:
    return belieflens.extract(env, params=PARAMS if params is None else params, model=model,
                              out=out, episodes=episodes, seed=seed, init=init, threads=1,
                              kernels="default")


@pytest.fixture(scope="module")
def lm_study(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    """A tiny-model coin-flip study of 8 episodes (the bootstrap's 1000 replicates need 7) and
    two untrained controls of it."""
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
        stats = statistic_features(ds)
        f = ds.bl.floor(controls, statistics=stats)
    assert list(stats) == ["counts", "turn", "last 1 flip", "last 2 flips", "last 4 flips"]
    assert f["selectivity"].dims == ("source", "layer")
    assert f["control_value"].dims == ("source", "control", "layer")
    assert f["baseline_value"].dims == ("source", "baseline")
    assert list(f["source"].values) == ["logit-lens", "decoder"]
    assert list(f["control"].values) == ["untrained seed 0", "untrained seed 1"]
    assert list(f["baseline"].values) == list(stats)
    assert f["seed"].values.tolist() == [0, 1]
    assert np.allclose(f.floor_mean, f.control_value.mean("control"))
    assert bool((f.floor_min <= f.floor_mean).all() and (f.floor_mean <= f.floor_max).all())
    tvd = f.sel(source="decoder")
    assert np.allclose(tvd.selectivity_floor, tvd.floor_mean - tvd.trained)  # positive = better
    best = str(tvd.baseline_best.values)
    assert best == str(tvd.baseline_value.idxmin("baseline").values)  # a TVD: the lowest
    assert np.allclose(tvd.selectivity_baseline, tvd.baseline_value.sel(baseline=best)
                       - tvd.trained)
    # against the larger (harder) of the two references: the lower selectivity
    assert np.allclose(tvd.selectivity, np.minimum(tvd.selectivity_floor,
                                                   tvd.selectivity_baseline))
    assert np.allclose(tvd.reference, np.minimum(tvd.floor_mean,
                                                 tvd.baseline_value.sel(baseline=best)))
    ok = np.isfinite(tvd.selectivity_low)
    assert bool((tvd.selectivity_low[ok] <= tvd.selectivity_high[ok]).all())
    assert np.array_equal(tvd.exceeds, tvd.exceeds_floor & tvd.exceeds_baseline)
    assert np.array_equal(tvd.exceeds_floor, tvd.selectivity_floor_low > 1e-6)
    assert "max-T" in f.attrs["correction"] and "seed" in f.attrs["interval"]
    lines = verdicts(f)
    assert len(lines) == 2 and all("best statistic baseline" in x for x in lines)
    text = format_floor(f)
    assert "statistic baselines (same folds and estimator): counts" in text
    assert f"vs {best} [interval]" in text  # the table's column beside the floor


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


def _record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power record in which a known pair of the tiny study's kind (coin flip, a language
    model) was separated by the logit lens and not by the decoder."""
    rec = {"pairs": {"a": {"env": "coin-flip", "models": "language model", "tests": {
        "logit-lens": {"power": True, "layers": [1]}, "decoder": {"power": False}}}}}
    path = tmp_path / "record.json"
    path.write_text(json.dumps(rec), encoding="utf-8")
    monkeypatch.setenv("BELIEFLENS_POWER_RECORD", str(path))


def test_analyze_prints_the_floor(lm_study: tuple[Path, ...], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    study, *controls = lm_study
    _record(tmp_path, monkeypatch)
    args = ["analyze", str(study), "--out", str(tmp_path / "r"), "--no-html"]
    for c in controls:
        args += ["--floor", str(c)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "== Floors: each read-out beside untrained controls and statistic baselines ==" \
        in r.stdout
    assert "decoder (TVD to the oracle) against the larger of its floor and its best " \
        "statistic baseline" in r.stdout
    assert "statistic baselines (the decoders' estimator and folds" in r.stdout
    assert "decoder vs " in r.stdout and "best statistic baseline" in r.stdout
    assert (tmp_path / "r" / "floor.png").is_file()
    report = (tmp_path / "r" / "report.md").read_text()
    assert "untrained seed 1" in report and "max-T" in report
    assert "**statistic baselines**" in report
    # each read-out's power on a known pair of the study's kind, from the record
    verdict = {line.split(" (")[0].lstrip("- "): line for line in report.splitlines()
               if line.startswith("- ") and "against" in line}
    assert verdict["logit-lens"].endswith("; shown power on a"), verdict
    assert verdict["decoder"].endswith("; no shown power: not separated on a"), verdict
    assert "decoder (no shown power): closest layer" in r.stdout
    assert "logit-lens: closest layer" in r.stdout


@pytest.fixture(scope="module")
def toy_null(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """coin-toy and four untrained networks of its shape on one study of 24 episodes."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        d = tmp_path_factory.mktemp("null")
        return {init: _extract("coin-toy", d / f"{init.replace(':', '')}.h5",
                               None if init == "trained" else init, env="coin-tokens",
                               params={}, episodes=24)
                for init in ("trained", "random:7", "random:0", "random:1", "random:2")}
    finally:
        torch.set_num_threads(before)


def _naive_flags(mine: Readout, theirs: list[Readout], n_boot: int = 1000) -> int:
    """Layers flagged by the uncorrected per-layer interval over episodes alone (the
    percentile bootstrap of the selectivity against the controls' mean, no seeds' spread)."""
    n_ep = mine.total.shape[0] if mine.total is not None else mine.layers[0].n.size
    w = np.random.default_rng(0).multinomial(n_ep, np.full(n_ep, 1 / n_ep), size=n_boot)
    sign = 1.0 if mine.metric == "r2" else -1.0
    boot = sign * (mine.values(w.astype(float))
                   - np.mean([c.values(w.astype(float)) for c in theirs], axis=0))
    return int((np.nanpercentile(boot, 2.5, axis=0) > 1e-6).sum())


def test_null_against_null_flags_no_layer(toy_null: dict[str, Path]) -> None:
    """An untrained coin-toy network (random:7) beside three others (random:0..2), 24
    episodes: no read-out is beyond its floor at any layer, nor on all layers together,
    once the interval covers the seeds' spread and holds over all layers. The naive
    interval (episodes only, layer by layer) flags layers on the same files."""
    controls = [toy_null[f"random:{i}"] for i in range(3)]
    with belieflens.open_cache(toy_null["random:7"]) as ds:
        targets = readout_targets(ds)
        f = ds.bl.floor(controls, targets=targets, statistics=statistic_features(ds))
        mine = readouts(ds, targets=targets)
    assert f.sizes["source"] == 5 and f.sizes["layer"] >= 5
    assert int(f.exceeds_floor.sum()) == 0 and not bool(f.exceeds_floor_all.any())
    assert int(f.exceeds.sum()) == 0
    theirs = []
    for c in controls:
        with belieflens.open_cache(c) as cds:
            theirs.append(readouts(cds, targets=targets))
    naive = [_naive_flags(m, [t[i] for t in theirs]) for i, m in enumerate(mine)]
    assert sum(naive) >= 3, naive  # the test can fail: without the correction it would


def test_a_trained_toy_is_beyond_the_same_floor(toy_null: dict[str, Path]) -> None:
    """The same controls and correction find the trained coin-toy: its next-token read-out
    through the logit lens is beyond the floor at the last layers; its posterior mean, which
    untrained networks read too, has a high floor (the counts baseline gives most of it as
    well), and its posterior over the bias's bins, which they do not give, is far above its
    floor's mean (at 24 episodes the seeds' spread of that fit is wide)."""
    controls = [toy_null[f"random:{i}"] for i in range(3)]
    with belieflens.open_cache(toy_null["trained"]) as ds:
        targets = readout_targets(ds)
        assert list(targets) == ["posterior mean", "posterior over bins", "posterior variance"]
        f = ds.bl.floor(controls, targets=targets, decoders=False,
                        statistics=statistic_features(ds))
    lens = f.sel(source="logit-lens")
    assert bool(lens.exceeds_floor.isel(layer=-1)) and int(f.exceeds_floor.sum()) >= 1
    mean = f.sel(source="geometry: posterior mean")
    assert float(mean.floor_mean.max()) > 0.9  # an untrained network reads the mean too
    assert str(mean.baseline_best.values) == "counts"  # linear in (h, n): short of the ratio
    assert float(mean.baseline_value.sel(baseline="counts")) > 0.75
    bins = f.sel(source="geometry: posterior over bins")
    assert float(bins.selectivity_floor.max()) > 0.3


def test_compare_sets_each_model_beside_its_controls(lm_study: tuple[Path, ...],
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    study, *controls = lm_study
    _record(tmp_path, monkeypatch)
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
    lines = r.stdout.splitlines()
    assert any(f"{names[0]} logit-lens:" in x and x.endswith("; shown power on a")
               for x in lines), r.stdout


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


def test_too_few_episodes_or_controls_is_one_line_giving_the_minimum(
        tmp_path: Path, one_thread: None) -> None:
    """A floor on 4 episodes (1000 bootstrap replicates need 7 to be distinct, the geometry's
    folds 5) or beside one control is refused in one line before anything is written."""
    paths = [_extract("coin-toy", tmp_path / f"{n}.h5", init, env="coin-tokens",
                      params={"length": 4}, episodes=4)
             for n, init in (("t", None), ("r0", "random:0"), ("r1", "random:1"))]
    out = tmp_path / "report"
    r = CliRunner().invoke(app, ["analyze", str(paths[0]), "--floor", str(paths[1]),
                                 "--floor", str(paths[2]), "--out", str(out)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs at least 7 episodes" in lines[0], r.stderr
    assert "this study has 4" in lines[0] and "--episodes 24" in lines[0]
    assert not out.exists()
    r = CliRunner().invoke(app, ["analyze", str(paths[0]), "--floor", str(paths[1]),
                                 "--out", str(out)])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "at least 2 control files" in r.stderr and not out.exists()
    with belieflens.open_cache(paths[0]) as ds, pytest.raises(ParameterError,
                                                              match="at least 7 episodes"):
        ds.bl.floor(paths[1:], decoders=False)


@pytest.mark.parametrize(("newer", "hash_b", "same"), [
    ({"turns": 10, "stated_as": "share"}, "q1", True),    # a parameter added since, same prompts
    ({"turns": 10, "stated_as": "share"}, "q2", False),   # the prompts differ
    ({"turns": 12, "stated_as": "share"}, "q1", False),   # a shared parameter differs
])
def test_a_file_written_before_a_parameter_existed_is_the_same_study_when_its_prompts_are(
        newer: dict[str, object], hash_b: str, same: bool) -> None:
    """A cache file written before a parameter existed lacks it in ``env_params``; it is the
    same study as a newer file only if every prompt both rendered is the same (their
    ``queries_sha256``) and every parameter both record is equal."""
    def attrs(params: dict[str, object], queries: str) -> dict[str, Any]:
        return {"env_name": "coin-flip", "env_params": json.dumps(params), "seed": "7",
                "episodes": "24", "model_id": "m", "model_n_layers": "2",
                "model_d_model": "8", "weights_hash": queries,
                "study": json.dumps({"queries_sha256": queries})}

    older, control = attrs({"turns": 10}, "q1"), attrs(newer, hash_b)
    control["weights_hash"] = "untrained"
    if same:
        check_floor(older, control, "control.h5")
        check_floor(control | {"weights_hash": "x"}, older | {"weights_hash": "y"}, "old.h5")
    else:
        with pytest.raises(ParameterError, match="its parameters differs"):
            check_floor(older, control, "control.h5")
