"""The token-level metrics are xarray objects with named dimensions: the geometry per target,
the output's agreement with the oracle and the points of the simplex figure."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

import belieflens
from belieflens.envs.tokens.metrics import (
    POSTERIOR_BINS,
    POSTERIOR_MEAN,
    POSTERIOR_VARIANCE,
    figure_target,
    geometries,
    output_agreement,
    simplex_points,
)


def test_metrics_are_xarray_with_named_dims(tmp_path: Path) -> None:
    coin = belieflens.extract("coin-tokens", model="coin-toy", episodes=12, seed=0,
                              out=tmp_path / "coin.h5")
    with belieflens.open_cache(coin) as ds:
        tree = geometries(ds)
        assert isinstance(tree, xr.DataTree)
        assert list(tree.children) == [POSTERIOR_MEAN, POSTERIOR_BINS, POSTERIOR_VARIANCE]
        for name, node in tree.children.items():
            g = node.to_dataset()
            assert g["r2"].dims == ("layer",) and g.attrs["target"] == name
            assert g["r2_linear_last"].dims == ("lag",) and 8 in g["lag"].values
        agree = output_agreement(ds)
        assert all(agree[v].dims == () for v in ("tvd_mean", "slope", "slope_se", "steps"))
        points = simplex_points(ds, target=figure_target(ds))
        assert points["true"].dims == points["fitted"].dims == ("query", "state")
        assert points["turn"].dims == ("query",)
        assert points.attrs["target"] == POSTERIOR_BINS
        assert points.sizes["query"] == ds.sizes["query"]
