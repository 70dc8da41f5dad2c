"""Power (:mod:`belieflens.analysis.power`, ``belieflens power``): each internal test on known
pairs. Separation from per-episode readings (a positive beyond its references is found, a
null is not, the interval widens with the seeds' spread), the read-outs a model was taught
left out, the pair's kind from its files, the record the reports' marks read; and end to end
on coin-toy beside three untrained networks of its shape (the lens, the decoders, the
geometry, patching, steering and interchange), with a pair of different studies and too few
episodes refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import belieflens
from belieflens.analysis.power import (
    PairFacts,
    RatioReading,
    check_power_episodes,
    held_out,
    left_out_cells,
    power_dataset,
    ratio_reading,
    separation,
)
from belieflens.analysis.power_record import MARK, marks_for, merge, record_of, study_kind
from belieflens.analysis.power_tests import LensTest, PatchTest
from belieflens.cli.main import app
from belieflens.errors import ParameterError
from belieflens.known_pairs import pair_kind
from belieflens.readouts.render import prompt_key

LAYERS = np.arange(4)


def _reading(rng: np.random.Generator, means: np.ndarray, n: int = 24,
             noise: float = 0.02) -> RatioReading:
    """A TVD-like reading: per episode and layer a mean of 5 read-outs around ``means``."""
    num = 5 * (means[None, :] + noise * rng.standard_normal((n, means.size)))
    return RatioReading(np.arange(n), LAYERS, num, np.full_like(num, 5.0))


def test_a_ratio_reading_sums_its_items_per_episode() -> None:
    r = ratio_reading(np.array([3, 1, 3]), np.array([[1.0], [2.0], [np.nan]]),
                      np.array([1.0, 1.0, 1.0]), [0])
    assert r.episodes.tolist() == [1, 3] and r.num.tolist() == [[2.0], [1.0]]
    assert r.den.tolist() == [[1.0], [1.0]]  # the NaN item adds nothing
    assert r.values(np.array([1.0, 1.0])).tolist() == [1.5]


def test_a_positive_beyond_its_base_separates_and_a_null_does_not() -> None:
    rng = np.random.default_rng(0)
    base = np.array([0.30, 0.30, 0.30, 0.30])
    better = np.array([0.30, 0.30, 0.20, 0.05])  # closer to the oracle at the last layers
    s = separation(LensTest(), "taught-base", _reading(rng, better), [_reading(rng, base)],
                   np.random.default_rng(1))
    found = s.beyond.low > 1e-6
    assert found.tolist() == [False, False, True, True]
    assert np.allclose(s.beyond.selectivity, s.references[0] - s.positive)  # TVD: ref - pos
    null = separation(LensTest(), "taught-base", _reading(rng, base), [_reading(rng, base)],
                      np.random.default_rng(2))
    assert not (null.beyond.low > 1e-6).any()


def test_untrained_references_widen_the_interval_by_their_spread() -> None:
    """The same positive beside three untrained networks that agree, and beside three that
    scatter by more than the difference: the second is no separation."""
    rng = np.random.default_rng(3)
    pos = _reading(rng, np.full(4, 0.10), noise=0.005)
    tight = [_reading(rng, np.full(4, 0.20), noise=0.005) for _ in range(3)]
    spread = [_reading(rng, np.full(4, m), noise=0.005) for m in (0.10, 0.40, 0.10)]
    a = separation(LensTest(), "trained-untrained", pos, tight, np.random.default_rng(0))
    b = separation(LensTest(), "trained-untrained", pos, spread, np.random.default_rng(0))
    assert (a.beyond.low > 1e-6).all()
    assert not (b.beyond.low > 1e-6).any() and (b.beyond.selectivity > 0.05).all()


def test_too_few_episodes_is_one_line_giving_the_minimum() -> None:
    with pytest.raises(ParameterError, match="at least 7 distinct episodes") as e:
        check_power_episodes(5)
    assert "\n" not in str(e.value) and "--episodes 24" in str(e.value)
    rng = np.random.default_rng(0)
    with pytest.raises(ParameterError, match="too few episodes"):
        separation(LensTest(), "taught-base", _reading(rng, np.zeros(4), n=4),
                   [_reading(rng, np.zeros(4), n=4)], rng)


def _table() -> xr.Dataset:
    """Four read-outs of two rotations each: one belief question per (episode, turn)."""
    prompts = [f"p{e}{t}{r}" for e in (0, 1) for t in (1, 2) for r in (0, 1)]
    ep = np.repeat([0, 1], 4)
    turn = np.tile(np.repeat([1, 2], 2), 2)
    return xr.Dataset({"prompt": ("query", prompts), "delivery": ("query", ["m"] * 8),
                       "probe": ("query", ["next"] * 8), "episode": ("query", ep),
                       "turn": ("query", turn)})


def test_a_taught_read_out_leaves_its_whole_question_out() -> None:
    ds = _table()
    cells = left_out_cells(ds, {prompt_key("p021")})  # one rotation of episode 0, turn 2
    assert cells == {("m", "next", 0, 2)}
    kept = held_out(ds, cells)
    assert kept.sizes["query"] == 6 and "p020" not in kept["prompt"].values  # both rotations
    assert held_out(ds, frozenset()) is ds and left_out_cells(ds, ()) == frozenset()


def test_the_pairs_kind_follows_from_its_files() -> None:
    toy = {"model_spec": "coin-toy", "model_init": "trained", "model_source": "toy"}
    r0, r1 = ({"model_spec": "coin-toy", "model_init": "random"} for _ in range(2))
    taught = {"model_spec": "smollm2-135m-bayes", "model_source": "adapter",
              "model_init": "trained"}
    base = {"model_spec": "smollm2-135m", "model_init": "trained", "model_source": "embedded"}
    assert pair_kind("p", [toy, r0, r1]) == "trained-untrained"
    assert pair_kind("p", [taught, base]) == "taught-base"
    with pytest.raises(ParameterError, match="at least 2 untrained"):
        pair_kind("p", [toy, r0])
    with pytest.raises(ParameterError, match="first file is an untrained network"):
        pair_kind("p", [r0, r1, toy])
    with pytest.raises(ParameterError, match="a taught adapter beside its base"):
        pair_kind("p", [base, toy])


def _facts(name: str, env: str = "rrxor", models: str = "toy") -> PairFacts:
    return PairFacts(name, "trained-untrained", env, models, "t", "r0, r1", 24, 3, 0)


def test_the_record_keeps_each_pair_and_marks_a_test_without_power() -> None:
    rng = np.random.default_rng(0)
    strong = separation(LensTest(), "taught-base", _reading(rng, np.array([.3, .3, .2, .05])),
                        [_reading(rng, np.full(4, 0.3))], rng)
    weak = separation(PatchTest(), "taught-base", _reading(rng, np.full(4, 0.3)),
                      [_reading(rng, np.full(4, 0.3))], rng)
    ds = power_dataset({("logit-lens", "a"): strong, ("patch", "a"): weak},
                       [LensTest(), PatchTest()], [_facts("a")])
    assert ds["separates"].dims == ("test", "pair", "layer")
    assert ds["power"].sel(pair="a").values.tolist() == [True, False]
    rec = record_of(ds, {"command": "belieflens power", "commit": "x", "date": "d"})
    entry = rec["pairs"]["a"]["tests"]["logit-lens"]
    assert entry["power"] and entry["layers"] == [2, 3] and entry["best_layer"] == 3
    json.dumps(rec)  # plain JSON
    both = merge(rec, {"pairs": {"b": {"env": "coin-flip", "models": "language model",
                                       "tests": {"decoder": {"power": False}}}}})
    assert sorted(both["pairs"]) == ["a", "b"]
    toy = marks_for({"env_name": "rrxor", "model_source": "toy"}, both)
    assert toy.mark("logit-lens") == "" and toy.mark("patch") == MARK
    assert toy.note("patch") == f"{MARK}: not separated on a"
    lm = marks_for({"env_name": "coin-flip", "model_source": "embedded"}, both)
    assert lm.beside("logit-lens") == f" ({MARK})"  # no pair of its kind ran it
    assert "no known pair of its kind (language model, coin-flip)" in lm.note("logit-lens")
    assert study_kind({"env_name": "rrxor", "model_source": np.array(["toy"])}) == (
        "rrxor", "toy")


# ----------------------------------------------------------------------------- end to end


def _extract(out: Path, init: str | None, episodes: int = 16, **params: Any) -> Path:
    return belieflens.extract("coin-tokens", params={"length": 12, **params},
                              model="coin-toy", out=out, episodes=episodes, seed=0,
                              init=init, threads=1, kernels="default")


@pytest.fixture(scope="module")
def toy_pair(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """coin-toy and three untrained networks of its shape, 16 episodes of 12 flips."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        d = tmp_path_factory.mktemp("power")
        return [_extract(d / f"{n}.h5", init) for n, init in (
            ("toy", None), ("r0", "random:0"), ("r1", "random:1"), ("r2", "random:2"))]
    finally:
        torch.set_num_threads(before)


def test_power_on_a_toy_beside_its_untrained_networks(toy_pair: list[Path], tmp_path: Path,
                                                      one_thread: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("BELIEFLENS_POWER_RECORD", str(record))
    monkeypatch.setenv("BELIEFLENS_RESULTS_DIR", str(tmp_path / "results"))
    out = tmp_path / "power"
    r = CliRunner().invoke(app, ["power", "--pair", " ".join(map(str, toy_pair)), "--out",
                                 str(out), "--turn", "4", "--turn", "8", "--steps", "20",
                                 "--results", "power-test", "--record", "--quiet"])
    assert r.exit_code == 0, r.output
    ds = xr.load_dataset(out / "power.nc", engine="h5netcdf")
    assert set(ds["test"].values) >= {"logit-lens", "decoder", "patch", "steer", "interchange",
                                      "geometry: posterior over bins"}
    assert ds["separates"].dims == ("test", "pair", "layer") and ds.sizes["layer"] == 5
    assert bool(ds["read"].all()), ds["read"].values
    pair = str(ds["pair"].values[0])
    assert ds["kind"].values.tolist() == ["trained-untrained"]
    assert ds["family"].sel(test="patch").item() == "intervention"
    # the trained toy's output is the posterior; the untrained networks' is not: the logit
    # lens at the last layer and patching the answer position at the last layer find it
    assert bool(ds["separates"].sel(test="logit-lens", pair=pair).isel(layer=-1))
    assert bool(ds["power"].sel(test="patch", pair=pair))
    for kind in ("patch", "steer", "interchange"):
        assert (out / f"toy-{kind}.h5").is_file() and (out / f"r2-{kind}.h5").is_file()
    assert f"{pair} (trained-untrained; coin-tokens, toy; 16 episodes)" in r.stdout
    assert "POWER" in r.stdout
    saved = json.loads(record.read_text())
    assert saved["pairs"][pair]["tests"]["logit-lens"]["power"] is True
    assert (tmp_path / "results" / "power-test.md").is_file()
    # the marks read the record: a toy study of the same kind
    with belieflens.open_cache(toy_pair[0]) as study:
        marks = marks_for(study.attrs)
    assert marks.mark("logit-lens") == ""
    again = CliRunner().invoke(app, ["power", "--pair", " ".join(map(str, toy_pair)),
                                     "--out", str(out), "--tests", "patch"])
    assert again.exit_code == 0, again.output
    assert "running patch on toy.h5" not in again.output  # its file is reused
    assert "running patch on toy vs r0, r1, r2" in again.output
    # a file run with other options (here: every layer, not layer 1) is refused, not read
    other = CliRunner().invoke(app, ["power", "--pair", " ".join(map(str, toy_pair)),
                                     "--out", str(out), "--tests", "patch", "--layers", "1"])
    assert other.exit_code == 2 and "toy-patch.h5 was run with layers" in other.stderr
    assert "Traceback" not in other.output
    # a result file of another study under a side's name is refused, not read
    (out / "r0-patch.h5").write_bytes((out / "toy-patch.h5").read_bytes())
    stale = CliRunner().invoke(app, ["power", "--pair", " ".join(map(str, toy_pair)),
                                     "--out", str(out), "--tests", "patch"])
    assert stale.exit_code == 2 and "r0-patch.h5 was run on another study" in stale.stderr


def test_a_pair_of_two_studies_is_one_line(toy_pair: list[Path], tmp_path: Path,
                                           one_thread: None) -> None:
    other = _extract(tmp_path / "other.h5", "random:0", length=8)
    r = CliRunner().invoke(app, ["power", "--pair", f"{toy_pair[0]} {toy_pair[1]} {other}",
                                 "--out", str(tmp_path / "p")])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is another study" in lines[0] and "parameters differs" \
        in lines[0], r.stderr
    few = [_extract(tmp_path / f"{n}.h5", init, episodes=4) for n, init in (
        ("t4", None), ("a4", "random:0"), ("b4", "random:1"))]
    r = CliRunner().invoke(app, ["power", "--pair", " ".join(map(str, few)), "--out",
                                 str(tmp_path / "q")])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "at least 7 distinct episodes" in r.stderr


def test_studies_of_one_file_name_get_their_folder_in_their_label() -> None:
    """A taught model's and its base's studies of one condition share a file name: each side's
    intervention files are named by its folder too, so that they do not collide in ``--out``."""
    from belieflens.known_pairs import side_labels

    assert side_labels([Path("a/toy.h5"), Path("a/random0.h5")]) == ["toy", "random0"]
    assert side_labels([Path("gates/S_1/new-sides-0.h5"), Path("gates/base/new-sides-0.h5")]
                       ) == ["S_1-new-sides-0", "base-new-sides-0"]
    assert side_labels([Path("x/s.h5"), Path("y/x/s.h5")]) == ["0-s", "1-s"]
