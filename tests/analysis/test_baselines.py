"""Statistic baselines: fitted with the decoders' estimator and folds on the features the
file's environment declares, rebuilt from the file's provenance (they agree with the tokens
the file stores), beside every decoder result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import belieflens
from belieflens.analysis.baselines import baseline_rows, baselines
from belieflens.analysis.geometry import last_tokens
from belieflens.analysis.summary import decoder_tvd
from belieflens.envs import statistic_features
from belieflens.envs.tokens.coin import CoinTokens
from belieflens.errors import ParameterError


@pytest.fixture(scope="module")
def coin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path_factory.mktemp("baselines") / "coin.h5"
        return belieflens.extract("coin-tokens", params={"length": 8}, model="coin-toy",
                                  out=out, episodes=24, seed=3, threads=1)
    finally:
        torch.set_num_threads(before)


def test_features_rebuilt_from_the_provenance_agree_with_the_stored_tokens(coin: Path) -> None:
    with belieflens.open_cache(coin) as ds:
        f = statistic_features(ds)
        assert list(f) == ["counts", "turn", "last 1 token", "last 2 tokens", "last 4 tokens"]
        assert all(v.shape[0] == ds.sizes["query"] for v in f.values())
        for k, name in ((1, "last 1 token"), (2, "last 2 tokens"), (4, "last 4 tokens")):
            # the one-hots decoded back to symbols (-1: none yet) are the file's own last
            # tokens (its input_ids; a toy's vocabulary ids are the symbols)
            slots = f[name][:, :3 * k].reshape(-1, k, 3).argmax(axis=2)
            assert np.array_equal(np.where(slots == 2, -1, slots), last_tokens(ds, k))
        env = belieflens.envs.get("coin-tokens", length=8)
        tokens = env.process.sample(24, 3).tokens  # type: ignore[attr-defined]
        heads, seen = CoinTokens(env.params).counts(tokens)  # type: ignore[arg-type]
        ep, turn = ds["episode"].values, ds["turn"].values
        assert np.array_equal(f["counts"][:, 0], heads[ep, turn])
        assert np.array_equal(f["counts"][:, 1], seen[turn])


def test_a_baseline_is_the_decoder_fitted_on_other_features(coin: Path) -> None:
    """A 'statistic' that is a layer's residual gives that layer's decoder exactly: the
    baselines are the decoders' estimator on the decoders' folds."""
    with belieflens.open_cache(coin) as ds:
        resid = np.asarray(ds["resid"].values, dtype=np.float64)
        rows = baseline_rows(ds, {"layer 2": resid[:, 2]}, np.random.default_rng(0))
        dec = decoder_tvd(ds, np.random.default_rng(0))
        b = baselines(ds, {"layer 2": resid[:, 2], **statistic_features(ds)}, seed=0,
                      decoder=dec)
    assert rows.dims == ("query", "baseline")
    per_instance = b["tvd_mean"].sel(baseline="layer 2")
    assert np.allclose(per_instance, dec.sel(layer=2).mean("episode"), equal_nan=True)
    assert b["selectivity"].dims == ("delivery", "probe", "layer")
    assert float(b["selectivity"].sel(layer=2).squeeze()) <= 1e-12  # itself is the best


def test_the_coin_toys_decoders_beside_its_baselines(coin: Path) -> None:
    with belieflens.open_cache(coin) as ds:
        b = ds.bl.baselines(statistic_features(ds))
        assert b["tvd_mean"].dims == ("delivery", "probe", "turn", "baseline")
        per = b["tvd_mean"].mean("turn").squeeze()
        assert str(b["best"].squeeze().values) == "counts"  # the oracle's own statistic
        assert float(per.sel(baseline="counts")) < float(per.sel(baseline="turn"))
        # the toy's residual holds the posterior's ratio, which is not linear in the counts
        assert float(b["selectivity"].isel(layer=-1).squeeze()) > 0.02
        with pytest.raises(ParameterError, match="not \\[query, feature\\]"):
            baselines(ds, {"short": np.zeros((3, 2))})


def test_an_environment_without_statistics_has_no_baselines(coin: Path) -> None:
    with belieflens.open_cache(coin) as ds:
        assert statistic_features(ds.assign_attrs(env_name="twenty-questions")) == {}
        assert statistic_features(ds.assign_attrs(env_name="no-such-env")) == {}
        # provenance that rebuilds other episodes (shorter than the file's): none, no crash
        assert statistic_features(ds.assign_attrs(env_params='{"length": 2}')) == {}
