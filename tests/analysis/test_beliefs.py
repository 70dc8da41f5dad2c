"""The query reshape (xarray unstack) and rotation pooling against a plain-loop reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from belieflens.analysis.beliefs import (
    PRESENT,
    by_instance,
    instance_logprob,
    output_beliefs,
)
from belieflens.episodes.latin import debias, latin_square
from belieflens.errors import CacheFileError


@st.composite
def caches(draw: Any) -> xr.Dataset:
    """A cache-like Dataset: probes of different K (padded), missing instances and rotations,
    non-finite log-probs, probes without an oracle, rows in a random order."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_probe = draw(st.integers(1, 3))
    ks = [draw(st.integers(1, 9)) for _ in range(n_probe)]
    deliveries = draw(st.sampled_from([["single-turn"], ["multi-turn", "single-turn"]]))
    rows: list[tuple[Any, ...]] = []
    for d in deliveries:
        for p, k in enumerate(ks):
            for e in draw(st.sets(st.integers(0, 6), min_size=1, max_size=3)):
                for t in range(draw(st.integers(1, 3))):
                    if rng.random() < 0.15:
                        continue  # a missing instance
                    rots = [r for r in range(k) if not (k > 1 and rng.random() < 0.1)]
                    oracle = rng.dirichlet(np.ones(k)) if rng.random() < 0.8 else None
                    for r in rots:
                        lp = rng.normal(size=k) * 3
                        if rng.random() < 0.05:
                            lp[rng.integers(k)] = np.nan if rng.random() < 0.5 else -np.inf
                        rows.append((d, f"q{p}", e, t, r, k, lp, latin_square(k)[r], oracle))
    assume(rows)  # every instance drawn missing: see test_a_file_without_read_outs_is_one_line
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    n, n_opt = len(rows), max(ks)
    lp = np.full((n, n_opt), np.nan)
    out = np.full((n, n_opt), -1, np.int32)
    lab = np.full((n, n_opt), "", object)
    orc = np.full((n, n_opt), np.nan)
    for i, (_d, p, _e, _t, _r, k, lpi, sq, o) in enumerate(rows):
        lp[i, :k], out[i, :k] = lpi, sq
        lab[i, :k] = [f"{p}:{j}" for j in range(k)]
        if o is not None:
            orc[i, :k] = o
    return xr.Dataset(
        {
            "option_logprob": (("query", "option"), lp),
            "outcome": (("query", "option"), out),
            "outcome_label": (("query", "outcome"), lab.astype(str)),
            "oracle": (("query", "outcome"), orc),
            "n_outcome": ("query", np.array([r[5] for r in rows], np.int32)),
        },
        coords={
            "delivery": ("query", [r[0] for r in rows]),
            "probe": ("query", [r[1] for r in rows]),
            "episode": ("query", np.array([r[2] for r in rows], np.int32)),
            "turn": ("query", np.array([r[3] for r in rows], np.int32)),
            "rotation": ("query", np.array([r[4] for r in rows], np.int32)),
        },
    )


def reference(ds: xr.Dataset, method: str) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Plain loops: group rows per instance, sort by rotation, debias, place on sorted axes."""
    keys = [np.asarray(ds[c].values) for c in ("delivery", "probe", "episode", "turn")]
    axes = [np.unique(k) for k in keys]
    k_q = ds["n_outcome"].values.astype(np.int64)
    n_max = int(k_q.max())
    groups: dict[tuple[int, ...], list[int]] = {}
    for q in range(ds.sizes["query"]):
        at = tuple(int(np.searchsorted(a, k[q])) for a, k in zip(axes, keys, strict=True))
        groups.setdefault(at, []).append(q)
    belief = np.full((*[len(a) for a in axes], n_max), np.nan)
    oracle = np.full_like(belief, np.nan)
    lp_all = ds["option_logprob"].values
    out_all = ds["outcome"].values.astype(np.int64)
    for at, qs in groups.items():
        qs = sorted(qs, key=lambda q: int(ds["rotation"].values[q]))
        k = int(k_q[qs[0]])
        oracle[at] = ds["oracle"].values[qs[0], :n_max]
        lp, o = lp_all[qs][:, :k], out_all[qs][:, :k]
        if np.all(o >= 0) and np.all(np.isfinite(lp)):
            cell: tuple[Any, ...] = (*at, slice(0, k))
            belief[cell] = debias(lp, o, method=method)  # type: ignore[arg-type]
    return belief, oracle, axes


@settings(max_examples=40, deadline=None)
@given(caches(), st.sampled_from(["geometric", "arithmetic"]))
def test_output_beliefs_equal_the_loop_reference(ds: xr.Dataset, method: Any) -> None:
    got = output_beliefs(ds, method=method)
    belief, oracle, axes = reference(ds, method)
    assert got["belief"].dims == ("delivery", "probe", "episode", "turn", "outcome")
    for name, axis in zip(("delivery", "probe", "episode", "turn"), axes, strict=True):
        assert np.array_equal(got[name].values, axis.astype(got[name].dtype))
    np.testing.assert_array_equal(got["belief"].values, belief)
    np.testing.assert_array_equal(got["oracle"].values, oracle)
    # rows in another order give the same result
    perm = np.random.default_rng(0).permutation(ds.sizes["query"])
    xr.testing.assert_identical(output_beliefs(ds.isel(query=perm), method=method), got)


def test_a_file_without_read_outs_is_one_line() -> None:
    empty = xr.Dataset(
        {"option_logprob": (("query", "option"), np.zeros((0, 2))),
         "outcome": (("query", "option"), np.zeros((0, 2), np.int32)),
         "outcome_label": (("query", "outcome"), np.zeros((0, 2), str)),
         "oracle": (("query", "outcome"), np.zeros((0, 2)))},
        coords={c: ("query", np.zeros(0, np.int32))
                for c in ("delivery", "probe", "episode", "turn", "rotation")},
    )
    with pytest.raises(CacheFileError, match="no read-outs"):
        output_beliefs(empty)


@settings(max_examples=20, deadline=None)
@given(caches())
def test_by_instance_places_every_query_once(ds: xr.Dataset) -> None:
    ids = xr.DataArray(np.arange(ds.sizes["query"], dtype=float), dims="query")
    grid = by_instance(ds, {"id": ids})
    assert grid["id"].dims[:5] == ("delivery", "probe", "episode", "turn", "rotation")
    placed = grid["id"].values[grid[PRESENT].values]
    assert sorted(placed.astype(int)) == list(range(ds.sizes["query"]))
    assert np.isnan(grid["id"].values[~grid[PRESENT].values]).all()
    for q in (0, ds.sizes["query"] - 1):
        cell = grid["id"].sel({c: ds[c].values[q] for c in
                               ("delivery", "probe", "episode", "turn", "rotation")})
        assert int(cell) == q


@settings(max_examples=10, deadline=None)
@given(caches())
def test_extra_dims_pool_like_a_loop_over_them(ds: xr.Dataset) -> None:
    rng = np.random.default_rng(3)
    lp = np.repeat(ds["option_logprob"].values[:, None, :], 2, axis=1)
    lp[:, 1] += rng.normal(size=lp[:, 1].shape)
    got = instance_logprob(ds, lp, method="geometric", extra=("layer",))
    assert got.dims == ("delivery", "probe", "episode", "turn", "layer", "outcome")
    first = instance_logprob(ds, lp[:, 0], method="geometric")
    np.testing.assert_allclose(got.isel(layer=0).values, first.values, rtol=1e-12, atol=0)


@settings(max_examples=3, deadline=None)
@given(caches())
def test_duplicate_queries_are_refused(ds: xr.Dataset) -> None:
    twice = xr.concat([ds, ds.isel(query=[0])], dim="query")
    with pytest.raises(CacheFileError, match="same delivery, probe, episode, turn"):
        output_beliefs(twice)
