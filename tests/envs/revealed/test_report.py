"""Revealed-vs-stated metrics, summaries and rendering on synthetic read-outs with known values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from belieflens.analysis.stats import mcnemar_test
from belieflens.envs.revealed.metrics import (
    distances,
    first_option_mass,
    revealed_correct,
    smooth,
    stated_correct,
    unique_mode,
)
from belieflens.envs.revealed.readouts import Readouts, readouts
from belieflens.envs.revealed.report import accuracy_bars, lens_plot, tables
from belieflens.envs.revealed.summary import ALL, TABLES, VARIANT, groups, summarise, table
from belieflens.errors import CacheFileError

NAN = np.nan


def arr(rows: list[Any], *extra: str) -> xr.DataArray:
    data = np.asarray(rows, dtype=float)
    dims = ("episode", *extra, "outcome")
    return xr.DataArray(data, dims=dims[: data.ndim], coords={"episode": np.arange(data.shape[0])})


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    m = p > 0
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def test_distances_known_values_and_padding() -> None:
    belief = arr([[0.5, 0.5, NAN], [0.2, 0.3, 0.5]])
    truth = arr([[1.0, 0.0, NAN], [0.2, 0.3, 0.5]])
    d = distances(belief, truth, eps=1e-3)
    assert d["chebyshev"].values == pytest.approx([0.5, 0.0])
    assert d["l1"].values == pytest.approx([1.0, 0.0])
    q = (np.array([1.0, 0.0]) + 1e-3) / (1 + 2e-3)
    p = np.array([0.5, 0.5])
    assert float(d["sym_kl"][0]) == pytest.approx(_kl(q, p) + _kl(p, q), rel=1e-9)
    # identical distributions: smoothing the truth alone leaves a tiny, positive KL
    assert 0 < float(d["sym_kl"][1]) < 1e-3


def test_smoothing_renormalises_and_stronger_smoothing_lowers_sym_kl() -> None:
    truth = arr([[1.0, 0.0, 0.0, NAN]])
    real = truth.notnull()
    s = smooth(truth, real, 0.01)
    assert float(s.sum("outcome")[0]) == pytest.approx(1.0)
    assert float(s[0, 3]) == 0.0
    belief = arr([[0.4, 0.3, 0.3, NAN]])
    weak = float(distances(belief, truth, eps=1e-6)["sym_kl"][0])
    strong = float(distances(belief, truth, eps=1e-2)["sym_kl"][0])
    assert np.isfinite(weak) and weak > strong > 0


def test_missing_belief_gives_nan_not_zero() -> None:
    d = distances(arr([[NAN, NAN]]), arr([[0.5, 0.5]]))
    assert all(bool(d[m].isnull().all()) for m in ("chebyshev", "l1", "sym_kl"))


def test_distances_broadcast_over_layers() -> None:
    lens = arr([[[0.5, 0.5], [0.9, 0.1]]], "layer")
    truth = arr([[1.0, 0.0]])
    d = distances(lens, truth)
    assert d["l1"].dims == ("episode", "layer")
    assert d["l1"].values[0] == pytest.approx([1.0, 0.2])


def test_unique_mode_ties_and_padding() -> None:
    truth = arr([[0.2, 0.5, 0.3, NAN], [0.5, 0.5, NAN, NAN], [0.1, 0.1, 0.1, 0.7]])
    assert unique_mode(truth).values.tolist() == [1, -1, 3]


def test_revealed_and_stated_correct() -> None:
    truth = arr([[0.2, 0.5, 0.3], [0.5, 0.5, 0.0], [0.6, 0.4, 0.0]])
    belief = arr([[0.1, 0.8, 0.1], [0.9, 0.1, 0.0], [0.3, 0.7, 0.0]])
    ok = revealed_correct(belief, truth).values
    assert ok[0] == 1.0 and np.isnan(ok[1]) and ok[2] == 0.0
    stated = arr([[0.1, 0.1, 0.6, 0.1, 0.1], [0.5, 0.1, 0.1, 0.2, 0.1], [NAN] * 5])
    correct = xr.DataArray([2.0, 3.0, 0.0], dims="episode", coords={"episode": [0, 1, 2]})
    sc = stated_correct(stated, correct).values
    assert sc[0] == 1.0 and sc[1] == 0.0 and np.isnan(sc[2])


def test_first_option_mass_only_where_uniform() -> None:
    truth = arr([[0.25] * 4, [0.5, 0.5, NAN, NAN], [0.75, 0.25, NAN, NAN]])
    belief = arr([[0.4, 0.2, 0.2, 0.2], [0.7, 0.3, NAN, NAN], [0.6, 0.4, NAN, NAN]])
    fm = first_option_mass(belief, truth)
    assert fm["p_first"].values[:2] == pytest.approx([0.4, 0.7])
    assert fm["expected"].values[:2] == pytest.approx([0.25, 0.5])
    assert np.isnan(fm["p_first"].values[2]) and np.isnan(fm["expected"].values[2])


def synthetic(
    n: int = 12, layers: int = 3, seed: int = 0
) -> tuple[Readouts, np.ndarray, np.ndarray]:
    """Two variants; truth has a unique mode except on the last 2 grid points (uniform)."""
    rng = np.random.default_rng(seed)
    truth = np.tile([0.6, 0.3, 0.1], (n, 1))
    truth[-2:] = 1 / 3
    rev_ok = rng.random(n) < 0.7
    belief = np.where(rev_ok[:, None], [0.5, 0.3, 0.2], [0.2, 0.7, 0.1])
    belief[-2:] = [0.5, 0.25, 0.25]
    correct = rng.integers(0, 5, n).astype(float)
    sta_ok = rng.random(n) < 0.4
    stated = np.full((n, 5), 0.1)
    pick = np.where(sta_ok, correct, (correct + 1) % 5).astype(int)
    stated[np.arange(n), pick] = 0.6
    ep = {"episode": np.arange(n)}

    def da(x: np.ndarray) -> xr.DataArray:
        return xr.DataArray(x, dims=("episode", "outcome"), coords=ep)

    lens = np.repeat(belief[:, None, :], layers, axis=1)
    lens[:, 0] = 1 / 3
    r = Readouts(
        revealed=da(belief), truth=da(truth), stated=da(stated),
        stated_correct=xr.DataArray(correct, dims="episode", coords=ep),
        variant=xr.DataArray(np.where(np.arange(n) < n // 2, "regular", "independent"),
                             dims="episode", coords=ep),
        stated_first_raw=xr.DataArray(np.full(n, 0.3), dims="episode", coords=ep),
        revealed_lens=xr.DataArray(lens, dims=("episode", "layer", "outcome"), coords=ep),
        stated_lens=xr.DataArray(np.repeat(stated[:, None, :], layers, axis=1),
                                 dims=("episode", "layer", "outcome"), coords=ep),
    )
    rev = rev_ok.astype(float)
    rev[-2:] = np.nan
    return r, sta_ok.astype(float), rev


def test_groups_variants_in_order_then_all() -> None:
    v = xr.DataArray(["b", "a", "b"], dims="episode")
    g = groups(v)
    assert [name for name, _ in g] == ["b", "a", ALL]
    assert g[0][1].tolist() == [True, False, True]
    assert [name for name, _ in groups(v[:1])] == ["b"]


def test_summary_accuracy_matches_mcnemar_and_counts() -> None:
    r, sta, rev = synthetic()
    s = summarise(r)
    acc = s["accuracy"].to_dataset()
    assert list(acc[VARIANT].values) == ["regular", "independent", ALL]
    row = acc.sel({VARIANT: ALL})
    keep = np.isfinite(rev)
    ref = mcnemar_test(sta[keep], rev[keep])
    assert int(row["n"]) == 10 and int(row["n_all"]) == 12
    assert float(row["staa"]) == pytest.approx(ref.acc_a)
    assert float(row["revb"]) == pytest.approx(ref.acc_b)
    assert float(row["diff"]) == pytest.approx(ref.acc_b - ref.acc_a)
    assert float(row["p_value"]) == pytest.approx(ref.p_value)
    assert str(row["mark"].item()) == ref.mark
    assert float(row["staa_all"]) == pytest.approx(sta.mean())
    assert float(row["staa_low"]) <= float(row["staa"]) <= float(row["staa_high"])


def test_summary_distances_lens_and_bias() -> None:
    r, _, _ = synthetic()
    s = summarise(r)
    per = distances(r.revealed, r.truth)
    assert float(s["distance"].to_dataset()["l1_mean"].sel({VARIANT: ALL})) == pytest.approx(
        float(per["l1"].mean()))
    lens_d, lens_a = table(s, "lens_distance"), table(s, "lens_accuracy")
    assert lens_d is not None and lens_a is not None
    # the last lens layer equals the output belief here, layer 0 is uniform
    assert lens_d["l1_mean"].sel({VARIANT: ALL}).values[-1] == pytest.approx(
        float(s["distance"].to_dataset()["l1_mean"].sel({VARIANT: ALL})))
    assert lens_a["revb"].sel({VARIANT: ALL}).values[-1] == pytest.approx(
        float(s["accuracy"].to_dataset()["revb"].sel({VARIANT: ALL})))
    # bias: only the two uniform grid points (both "independent", |O| = 3)
    b = s["bias"].to_dataset()
    assert list(b[VARIANT].values) == ["independent |O|=3"]
    assert int(b["n"][0]) == 2
    assert float(b["p_first_mean"][0]) == pytest.approx(0.5)
    assert float(b["expected"][0]) == pytest.approx(1 / 3)
    assert float(b["stated_a_mean"][0]) == pytest.approx(0.3)


def test_summary_is_a_tree_of_tables_with_named_dims() -> None:
    r, _, _ = synthetic()
    s = summarise(r)
    assert isinstance(s, xr.DataTree) and set(s.children) == set(TABLES)
    assert s.attrs["lens_scoring"] == "first-token" and s.attrs["eps"] > 0
    for name in ("distance", "accuracy", "bias"):
        t = table(s, name)
        assert t is not None and all(t[v].dims == (VARIANT,) for v in t.data_vars), name
    for name in ("lens_distance", "lens_accuracy"):
        t = table(s, name)
        assert t is not None and t["n"].dims == (VARIANT, "layer"), name


def test_tables_and_figures_render(tmp_path: Path) -> None:
    r, _, _ = synthetic()
    s = summarise(r)
    ts = tables(s)
    assert len(ts) == 6
    first = ts[0]
    md = first.markdown()
    assert md.count("\n|") == 2 + 3  # header rule + 3 rows after the header line
    assert "regular" in first.text() and "sym KL" in first.text()
    bars = accuracy_bars(s, tmp_path / "a.png", "t")
    lens = lens_plot(s, tmp_path / "l.png", "t")
    assert lens is not None
    for f in (bars, lens):
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_unique_mode_still_renders(tmp_path: Path) -> None:
    r, _, _ = synthetic()
    uniform = xr.full_like(r.truth, 1 / 3)
    r2 = Readouts(revealed=r.revealed, truth=uniform, stated=r.stated,
                  stated_correct=r.stated_correct, variant=r.variant,
                  stated_first_raw=r.stated_first_raw)
    s = summarise(r2)
    assert int(s["accuracy"].to_dataset()["n"].sum()) == 0
    assert int(s["accuracy"].to_dataset()["n_all"].sel({VARIANT: ALL})) == 12
    assert table(s, "lens_distance") is None
    assert accuracy_bars(s, tmp_path / "a.png", "t").exists()


def test_readouts_rejects_other_environments() -> None:
    ds = xr.Dataset(coords={"probe": ("query", ["p0", "p0"])})
    with pytest.raises(CacheFileError, match="revealed"):
        readouts(ds)
