"""``belieflens compare``: two tiny random models of different depths on one study."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import belieflens
from belieflens.analysis.compare import (
    compare,
    controls,
    depth_grid,
    nearest_layers,
    no_controls,
    updating_slope,
)
from belieflens.cli.main import app
from belieflens.errors import ParameterError

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

PARAMS = {"turns": 3, "delivery": "multi-turn"}


def _llama(tokenizer: PreTrainedTokenizerBase, layers: int, seed: int) -> LlamaForCausalLM:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(50.0)
    return model


@pytest.fixture(scope="module")
def studies(
    smol_tokenizer: PreTrainedTokenizerBase, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """coin-flip (3 turns, multi-turn, 4 episodes) from a 2-block and a 3-block model, and the
    2-block model on another study (2 turns)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("compare")
    out: dict[str, Path] = {}
    try:
        for name, layers, seed in (("two", 2, 1), ("three", 3, 2)):
            folder = root / f"tiny-{name}"
            _llama(smol_tokenizer, layers, seed).save_pretrained(folder)
            smol_tokenizer.save_pretrained(folder)
            out[name] = belieflens.extract("coin-flip", params=PARAMS, model=str(folder),
                                           out=root / f"{name}.h5", episodes=4, seed=0)
        out["other"] = belieflens.extract(
            "coin-flip", params={**PARAMS, "turns": 2}, model=str(root / "tiny-two"),
            out=root / "other.h5", episodes=4, seed=0)
    finally:
        torch.set_num_threads(before)
    return out


def test_depth_grid_and_nearest_layers() -> None:
    grid = depth_grid([2, 3])
    assert np.allclose(grid, [0, 1 / 3, 2 / 3, 1])
    assert nearest_layers(3, grid).tolist() == [0, 1, 2, 3]
    assert nearest_layers(2, grid).tolist() == [0, 1, 1, 2]


def test_updating_slope_recovers_the_rate_of_updating() -> None:
    rng = np.random.default_rng(0)
    orc = xr.DataArray(rng.random((6, 5)), dims=("episode", "turn"))
    beta, se, n = updating_slope(0.3 + 0.5 * orc, orc)  # half the Bayesian update, any offset
    assert abs(beta - 0.5) < 1e-12 and se < 1e-12 and n == 24
    noisy = orc + xr.DataArray(rng.normal(0, 0.01, (6, 5)), dims=("episode", "turn"))
    beta, se, _ = updating_slope(noisy, orc)
    assert abs(beta - 1) < 0.1 and 0 < se < 0.1
    flat = xr.full_like(orc, 0.5)
    assert updating_slope(flat, orc)[0] == 0.0
    one = orc.isel(episode=[0])  # one episode: no clustered standard error
    assert np.isnan(updating_slope(one, one)[0])


def test_compare_two_depths_on_one_dataset(studies: dict[str, Path]) -> None:
    cmp = belieflens.compare([studies["two"], studies["three"]], decoders=False)
    assert list(cmp["model"].values) == ["tiny-two", "tiny-three"]
    assert cmp["n_layers"].values.tolist() == [2, 3]
    assert cmp.sizes["depth"] == 4
    assert np.allclose(cmp["depth"].values, [0, 1 / 3, 2 / 3, 1])
    assert cmp["layer"].dims == ("model", "depth")
    assert cmp["layer"].values.tolist() == [[0, 1, 1, 2], [0, 1, 2, 3]]
    assert cmp["tvd_mean"].dims == ("model", "delivery", "probe", "turn", "depth", "source")
    assert cmp["output_tvd_mean"].dims == ("model", "delivery", "probe", "turn")
    # each grid point holds the model's own layer's values, and the output per turn is
    # the single-file analysis's
    for name, path in (("tiny-two", studies["two"]), ("tiny-three", studies["three"])):
        ds = belieflens.open_cache(path)
        own = ds.bl.summary(decoders=False)
        beliefs = ds.bl.divergence("tvd").mean("episode")
        ds.close()
        layers = cmp["layer"].sel(model=name).values
        got = cmp["tvd_mean"].sel(model=name, source="logit-lens").transpose(
            "delivery", "probe", "turn", "depth").values
        want = own["tvd_mean"].sel(source="logit-lens").isel(layer=layers).transpose(
            "delivery", "probe", "turn", "layer").values
        assert np.allclose(got, want, equal_nan=True)
        assert np.allclose(cmp["output_tvd_mean"].sel(model=name).values,
                           beliefs.transpose("delivery", "probe", "turn").values,
                           equal_nan=True)
        best = cmp.sel(model=name, source="logit-lens")
        lens = own["tvd_mean"].sel(source="logit-lens").mean("turn")
        for p in cmp["probe"].values:
            b = best.sel(delivery="multi-turn", probe=p)
            la = int(b["best_layer"])
            assert la == int(lens.sel(delivery="multi-turn", probe=p).argmin("layer"))
            assert float(b["best_depth"]) == pytest.approx(la / int(cmp["n_layers"]
                                                                    .sel(model=name)))
    assert np.isfinite(cmp["slope"].values).all() and np.isfinite(cmp["slope_se"].values).all()
    assert (cmp["slope_n"].values > 0).all()
    assert cmp["position_excess_mean"].dims == ("model", "delivery", "probe", "option")
    assert bool(cmp["tvd_mean"].sel(source="decoder").isnull().all())  # decoders=False


def test_compare_refuses_different_studies_in_one_line(studies: dict[str, Path]) -> None:
    with pytest.raises(ParameterError) as e:
        compare([studies["three"], studies["other"]])
    msg = str(e.value)
    assert "\n" not in msg and "are different studies (env_params" in msg
    with pytest.raises(ParameterError, match="come from the same model"):
        compare([studies["two"], studies["other"], studies["two"]][::2])
    with pytest.raises(ParameterError, match="at least two"):
        compare([studies["two"]])


def test_cli_compare_writes_report_figures_and_dataset(
    studies: dict[str, Path], tmp_path: Path
) -> None:
    runner = CliRunner()
    out = tmp_path / "cmp"
    r = runner.invoke(app, ["compare", str(studies["two"]), str(studies["three"]),
                            "--out", str(out), "--no-decoders"])
    assert r.exit_code == 0, r.output
    assert "updating slope" in r.output and "tiny-three" in r.output
    for f in ("compare_depth.png", "compare_turns.png", "compare_updating.png"):
        assert (out / f).stat().st_size > 1000
    assert "![TVD against relative depth](compare_depth.png)" in (out / "compare.md").read_text()
    with xr.open_dataset(out / "compare.nc", engine="h5netcdf") as ds:
        assert ds.sizes["model"] == 2 and ds.sizes["depth"] == 4
    r = runner.invoke(app, ["compare", str(studies["two"]), str(studies["other"])])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("error: ")
    assert "different studies" in r.output


def test_positive_controls_are_those_of_the_study() -> None:
    of = belieflens.envs.positive_control
    attrs = [{"env_name": "coin-tokens"}, {"env_name": "coin-flip"}, {"env_name": "coin-flip"}]
    assert controls(attrs, of) == [True, False, False]
    assert controls(attrs, no_controls) == [False, False, False]  # the lookup decides
    assert controls([{"env_name": "coin-tokens"}] * 2, of) == [False, False]  # no study beside
    assert controls([{"env_name": "mess3"}, {"env_name": "coin-tokens"}], of) == [False, False]
    assert controls([{"env_name": "judgment"}, {"env_name": "coin-tokens"}], of) == [False, False]


def test_coin_toy_stands_beside_the_models_as_positive_control(
    studies: dict[str, Path], tmp_path: Path
) -> None:
    """A coin-tokens study of coin-toy (another environment, length and episodes) joins the
    coin-flip comparison, labelled, its read-out after k flips at turn k."""
    toy = belieflens.extract("coin-tokens", model="coin-toy", episodes=8, seed=3,
                             out=tmp_path / "toy.h5")
    cmp = belieflens.compare([studies["two"], toy], decoders=False)
    name = "coin-toy (positive control)"
    assert list(cmp["model"].values) == ["tiny-two", name]
    assert cmp["positive_control"].values.tolist() == [0, 1]
    assert cmp["turn"].values.tolist() == [0, 1, 2, 3]  # the study's turns only
    assert cmp.attrs["env_name"] == "coin-flip" and "coin-tokens" in cmp.attrs["positive_controls"]
    toy_out = cmp["output_tvd_mean"].sel(model=name, delivery="multi-turn", probe="next-flip")
    assert np.isfinite(toy_out.values).all() and float(toy_out.mean()) < 0.05
    with belieflens.open_cache(toy) as ds:  # turn t is the file's read-out after t flips
        own = ds.bl.divergence("tvd").mean("episode").sel(probe="next-token", turn=[0, 1, 2, 3])
    assert np.allclose(toy_out.values, own.squeeze().values)
    assert float(cmp["output_tvd_mean"].sel(model="tiny-two", probe="next-flip").mean()) > 0.05
    assert float(cmp["slope"].sel(model=name, delivery="multi-turn", probe="next-flip")) > 0.5
    assert bool(cmp["output_tvd_mean"].sel(model=name, probe="bias").isnull().all())
    assert np.isfinite(cmp["tvd_mean"].sel(model=name, probe="next-flip",
                                           source="logit-lens").values).all()
    r = CliRunner().invoke(app, ["compare", str(studies["two"]), str(toy), "--no-decoders",
                                 "--out", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    assert "positive control: a toy transformer" in r.output and name in r.output
    assert name in (tmp_path / "cmp" / "compare.md").read_text()
