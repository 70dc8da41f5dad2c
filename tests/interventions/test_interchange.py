"""Interchange on a learned subspace (DAS), on the shipped toys: the swap's mechanics, a
learned subspace that beats random ones where the toy holds its belief (and does not when the
training labels are permuted), held-out pairs, count-preserving order swaps, the result file
and its report, and bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import belieflens
from belieflens.analysis.follow import TRAINED, best_layer, interchange_follow
from belieflens.cli.intervene import app
from belieflens.interventions import das
from belieflens.interventions.pairs import Pair
from belieflens.interventions.readouts import Selection, StudyReadouts, read_study
from belieflens.interventions.swaps import instance_pairs
from belieflens.model.load import LoadedModel, load
from belieflens.report.interventions import report

TURNS = tuple(range(1, 11))
runner = CliRunner()


@pytest.fixture(scope="module")
def rrxor_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ic") / "rrxor.h5"
    return belieflens.extract("rrxor", model="rrxor-toy", episodes=60, seed=3, out=out)


@pytest.fixture(scope="module")
def rrxor_toy() -> LoadedModel:
    return load("rrxor-toy")


def _pairs(study: StudyReadouts, episodes: range) -> list[Pair]:
    return instance_pairs(study, Selection(turns=TURNS, episodes=tuple(episodes)), "any")


def _rows(model: LoadedModel, study: StudyReadouts, pairs: list[Pair], layer: int,
          permute: np.random.Generator | None = None) -> das.LayerRows:
    oracle = np.asarray(study.table["oracle"].values)
    outcome = np.asarray(study.table["outcome"].values)
    target = np.stack([oracle[p.source][outcome[p.base][:2]] for p in pairs])
    if permute is not None:
        target = target[permute.permutation(len(pairs))]
    return das.layer_rows(model, [study.queries[p.base] for p in pairs],
                          [study.queries[p.source] for p in pairs], target, (layer,))[layer]


def _follow(study: StudyReadouts, pairs: list[Pair], rows: das.LayerRows,
            swapped: np.ndarray) -> float:
    def dist(lp: np.ndarray) -> np.ndarray:
        p = np.exp(lp[:, :2] - lp[:, :2].max(1, keepdims=True))
        out: np.ndarray = p / p.sum(1, keepdims=True)  # one rotation: options = outcomes 0, 1
        return out

    oracle = np.asarray(study.table["oracle"].values)[:, :2]
    d_o = np.stack([oracle[p.source] - oracle[p.base] for p in pairs])
    d_p = dist(swapped) - dist(rows.base_logprob)
    return float((d_p * d_o).sum() / (d_o**2).sum())


def test_the_swap_takes_the_subspace_from_the_source(rrxor_study: Path,
                                                     rrxor_toy: LoadedModel) -> None:
    st = read_study(rrxor_study)
    pairs = _pairs(st, range(0, 12))[:20]
    top = rrxor_toy.info.n_layers
    rows = _rows(rrxor_toy, st, pairs, top)
    d = rrxor_toy.info.d_model
    # everything swapped at the last layer: the source's own output; nothing: the base's
    np.testing.assert_allclose(das.swap_logprobs(rrxor_toy, rows, top, np.eye(d)),
                               rows.source_logprob, atol=1e-5)
    np.testing.assert_allclose(das.swap_logprobs(rrxor_toy, rows, top, np.zeros((d, 1))),
                               rows.base_logprob, atol=1e-5)
    basis = das.random_basis(d, 3, np.random.default_rng(0))
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-12)


@pytest.mark.parametrize("layer", [5])
def test_a_learned_subspace_beats_random_ones_and_permuted_labels_learn_nothing(
        rrxor_study: Path, rrxor_toy: LoadedModel, layer: int) -> None:
    # rrxor-toy holds its next-token belief at the answer position in its late layers
    st = read_study(rrxor_study)
    train, test = _pairs(st, range(0, 40)), _pairs(st, range(40, 60))
    recipe = das.Recipe(rank=1, steps=80, seed=0)
    scored = _rows(rrxor_toy, st, test, layer)
    basis, losses = das.train_basis(rrxor_toy, _rows(rrxor_toy, st, train, layer), layer,
                                    recipe)
    np.testing.assert_allclose(basis.T @ basis, np.eye(1), atol=1e-5)
    assert losses[-10:].mean() < losses[:10].mean()
    learned = _follow(st, test, scored, das.swap_logprobs(rrxor_toy, scored, layer, basis))
    rand = _follow(st, test, scored, das.swap_logprobs(
        rrxor_toy, scored, layer, das.random_basis(basis.shape[0], 1,
                                                   np.random.default_rng(1))))
    permuted, _ = das.train_basis(
        rrxor_toy, _rows(rrxor_toy, st, train, layer, np.random.default_rng(2)), layer, recipe)
    shuffled = _follow(st, test, scored, das.swap_logprobs(rrxor_toy, scored, layer, permuted))
    assert learned > rand + 0.5, (learned, rand)
    assert shuffled < learned - 0.4, (learned, shuffled)


def test_the_model_weights_take_no_gradient_and_stay(rrxor_study: Path,
                                                     rrxor_toy: LoadedModel) -> None:
    st = read_study(rrxor_study)
    before = [p.detach().clone() for p in rrxor_toy.bridge.parameters()]
    flags = [p.requires_grad for p in rrxor_toy.bridge.parameters()]
    das.train_basis(rrxor_toy, _rows(rrxor_toy, st, _pairs(st, range(0, 10)), 3), 3,
                    das.Recipe(rank=2, steps=3))
    after = list(rrxor_toy.bridge.parameters())
    assert all(bool((a == b).all()) for a, b in zip(after, before, strict=True))
    assert [p.requires_grad for p in after] == flags


def test_order_swaps_keep_the_counts_and_change_the_order(rrxor_study: Path) -> None:
    st = read_study(rrxor_study)
    pairs = instance_pairs(st, Selection(turns=TURNS), "order")
    assert len(pairs) > 50
    oracle = np.asarray(st.table["oracle"].values)
    moves = []
    for p in pairs:
        b, s = st.queries[p.base].context_ids, st.queries[p.source].context_ids
        assert sorted(b) == sorted(s) and b != s
        moves.append(np.abs(oracle[p.source] - oracle[p.base]).sum())
    assert np.mean(np.asarray(moves) > 1e-9) > 0.3  # rrxor's oracle depends on order


@pytest.fixture(scope="module")
def coin_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ic") / "coin.h5"
    return belieflens.extract("coin-tokens", model="coin-toy", episodes=40, seed=0, out=out,
                              params={"length": 12})


def test_a_counting_oracle_and_a_counting_model_do_not_move_on_order_swaps(
        coin_study: Path, rrxor_study: Path) -> None:
    moved = {}
    for name, path in (("coin", coin_study), ("rrxor", rrxor_study)):
        st = read_study(path)
        pairs = instance_pairs(st, Selection(turns=tuple(range(2, 11))), "order")
        oracle = np.asarray(st.table["oracle"].values)
        d_o = np.array([np.nansum(np.abs(oracle[p.source] - oracle[p.base])) for p in pairs])
        out = np.exp(np.asarray(st.table["option_logprob"].values)[:, :2])
        out /= out.sum(1, keepdims=True)
        moved[name] = float(np.mean([0.5 * np.abs(out[p.source] - out[p.base]).sum()
                                     for p in pairs]))
        if name == "coin":
            assert np.abs(d_o).max() < 1e-9  # the coin's posterior counts, order aside
    assert moved["coin"] < 0.05 < moved["rrxor"], moved


@pytest.fixture(scope="module")
def result(rrxor_study: Path, rrxor_toy: LoadedModel,
           tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ic") / "interchange.h5"
    return belieflens.interchange(
        rrxor_study, out=out, model=rrxor_toy, select=Selection(turns=TURNS),
        options=belieflens.InterchangeOptions(layers=(0, 6), rank=1, steps=40, controls=2,
                                              untrained=("random:0",)))


def test_the_result_file_holds_the_floors_on_held_out_pairs(result: Path) -> None:
    with xr.open_dataset(result, engine="h5netcdf") as ds:
        ds = ds.load()
    assert ds.attrs["kind"] == "intervention-interchange"
    assert ds["swapped_logprob"].dims == ("model", "pair", "layer", "option")
    assert ds["control_logprob"].sizes["draw"] == 2
    assert list(ds["model"].values) == ["trained", "random:0"]
    assert set(ds["split"].values) == {"validation", "test"}
    assert set(ds["pairing"].values) <= {"any", "order"}
    train = set(int(e) for e in np.atleast_1d(ds.attrs["train_episodes"]))
    for split in ("validation", "test"):
        rows = ds["split"].values == split
        base, src = set(ds["episode"].values[rows]), set(ds["source_episode"].values[rows])
        assert not (base | src) & train
        other = ds["split"].values != split
        assert not (base | src) & set(ds["episode"].values[other])
    basis = ds["basis"].sel(model="trained", layer=6).values
    np.testing.assert_allclose(basis.T @ basis, np.eye(1), atol=1e-5)


def test_follow_and_its_floors_on_rrxor_toy(result: Path) -> None:
    with xr.open_dataset(result, engine="h5netcdf") as ds:
        summ = interchange_follow(ds.load())
    test = summ.sel(split="test", pairing="any")
    top, embed = test.sel(layer=6), test.sel(layer=0)
    trained = top.sel(model=TRAINED)
    # at the last layer the learned subspace moves the output as the oracle does; at the
    # embeddings a pair's answer position holds the same token, so nothing moves
    assert float(trained["follow"]) > 0.8
    assert float(top["gap_low"]) > 0.5
    assert abs(float(embed.sel(model=TRAINED)["follow"])) < 1e-6
    assert float(trained["follow_low"]) <= float(trained["follow"]) <= float(
        trained["follow_high"])
    assert abs(float(top.sel(model="random:0")["follow"])) < 0.2
    assert best_layer(summ) == 6


def test_analyze_reports_the_best_layer_beside_its_floors(result: Path, tmp_path: Path) -> None:
    a = report(result, tmp_path / "rep", html=True)
    assert "interchange follow at layer 6 (best on validation pairs), test pairs (any" in \
        a.headline
    assert "random subspace" in a.text and "untrained networks: random:0" in a.text
    assert {f.name for f in a.files} == {"interchange_follow.png", "report.md",
                                         "intervention.html"}


def _one_line_error(r: Any) -> str:
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return str(lines[0])


@pytest.mark.parametrize(("args", "fragment"), [
    (["--rank", "65"], "a subspace rank in 1..64"),
    (["--layers", "7"], "a layer in 0..6"),
    (["--episode", "1", "--episode", "2", "--episode", "3"], "needs at least 8"),
    (["--untrained", "trained"], "an untrained network"),
    (["--pairing", "sideways"], "--pairing"),
    (["--heldout", "1"], "strictly between 0 and 1"),
])
def test_bad_input_is_one_line(rrxor_study: Path, tmp_path: Path, args: list[str],
                               fragment: str) -> None:
    out = tmp_path / "x.h5"
    line = _one_line_error(runner.invoke(app, ["interchange", str(rrxor_study), "--out",
                                               str(out), "--quiet", *args]))
    assert fragment in line
    assert not out.exists()


def test_patch_gets_the_follow_scale_and_order_swaps(rrxor_study: Path, rrxor_toy: LoadedModel,
                                                      tmp_path: Path) -> None:
    from belieflens.analysis.follow import patch_follow

    out = belieflens.patch(rrxor_study, out=tmp_path / "patch.h5", model=rrxor_toy,
                           options=belieflens.PatchOptions(layers=(0, 6), positions=("answer",),
                                                           pairing="order",
                                                           untrained=("random:0",)),
                           select=Selection(turns=TURNS))
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        ds = ds.load()
    assert set(ds["pairing"].values) == {"order"}
    f = patch_follow(ds).sel(pairing="order", positions="answer")
    # the whole residual at the last layer's answer position is what the output reads: the
    # patch follows exactly as far as the clean source does; at the embeddings a pair's answer
    # position holds the same token and nothing moves
    assert float(f["follow"].sel(layer=6)) == pytest.approx(float(f["source_follow"]), abs=1e-4)
    assert float(f["follow"].sel(layer=6)) > 0.8
    assert abs(float(f["follow"].sel(layer=0))) < 1e-6
    assert int(f["n_moving"]) > 0
    # an untrained network's patch moves its output, but not as the oracle says
    assert abs(float(f["untrained_floor"].sel(layer=6))) < 0.2
    assert float(f["gap_untrained_low"].sel(layer=6)) > 0.5
    assert list(ds["model"].values) == ["random:0"]
    text = report(out).text
    assert "follow: the patched output's move along the oracle's move" in text
    assert "order pairing" in text and "gap over the untrained networks" in text


def test_steering_gets_the_follow_scale(rrxor_study: Path, rrxor_toy: LoadedModel,
                                        tmp_path: Path) -> None:
    from belieflens.analysis.follow import steer_follow
    from belieflens.analysis.interventions import steer_summary

    out = belieflens.steer(rrxor_study, out=tmp_path / "steer.h5", model=rrxor_toy,
                           options=belieflens.SteerOptions(layers=(6,), alphas=(-1.0, 0.0, 1.0),
                                                           n_folds=2),
                           select=Selection(turns=(5, 9)))
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        ds = ds.load()
    gain = ds["fold_gain"].values
    assert np.isfinite(gain).all() and (gain > 0).all()
    summ = steer_summary(ds)
    f = steer_follow(summ, ds)
    assert f is not None
    expect = summ["slope_mean"] / ds["fold_gain"].mean("fold")
    np.testing.assert_allclose(f["follow_mean"].values, expect.values)
    assert "follow: the slope divided by how far the decoder reads" in report(out).text


@pytest.mark.parametrize("kind", ["llama", "gemma"])
def test_the_answer_alone_through_the_cache_is_the_whole_context_run_again(
        kind: str, request: pytest.FixtureRequest, tiny_study: Path,
        one_thread: None) -> None:
    """Where the model's cache can be reused, a swap runs only the answer position (the
    context's keys and values come from one clean run of each distinct base); its option
    log-probs and their gradient are those of running the whole context again. Gemma 3's
    layers that slide over 4 positions too: the clean run keeps every position."""
    import dataclasses

    import torch

    tiny_model: LoadedModel = request.getfixturevalue(
        "tiny_model" if kind == "llama" else "tiny_gemma_model")
    st = read_study(tiny_study)
    qs = [q for q in st.queries if len(q.option_ids) == 2][:9]
    assert len({len(q.context_ids) for q in qs}) >= 2
    base, source = qs[:5] * 2, (qs[4:] + qs[:5])[:10]  # repeated bases and sources
    target = np.full((10, 2), 0.5)
    plain = dataclasses.replace(tiny_model, info=dataclasses.replace(tiny_model.info,
                                                                     prefix_reuse=False))
    for layer in (1, 2):
        fast = das.layer_rows(tiny_model, base, source, target, (layer,))[layer]
        slow = das.layer_rows(plain, base, source, target, (layer,))[layer]
        assert fast.cache is not None and fast.context is None
        assert slow.cache is None and slow.context is not None
        assert len({int(i) for i in fast.unique}) == 5
        basis = das.random_basis(tiny_model.info.d_model, 2, np.random.default_rng(layer))
        np.testing.assert_allclose(das.swap_logprobs(tiny_model, fast, layer, basis),
                                   das.swap_logprobs(plain, slow, layer, basis),
                                   atol=1e-5, rtol=1e-6)
        grads = []
        for rows, model in ((fast, tiny_model), (slow, plain)):
            values = (rows.answer * 1.1).requires_grad_(True)
            with das.frozen(model), torch.enable_grad():
                lp = das.swapped_logprobs(model, rows, layer, values, torch.arange(10))
                lp[:, 0].sum().backward()
            assert values.grad is not None
            grads.append(values.grad)
        torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)
        assert float(grads[0].abs().max()) > 0
