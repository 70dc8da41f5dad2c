"""Dutch-book metrics: credences back in listed order, hand and LP books, per-kind summary,
as xarray objects with named dimensions."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from belieflens.envs.dutch_book.metrics import (
    MATERIAL_LOSS,
    QUESTION,
    kind_summary,
    listed_order,
    scenario_scores,
)
from tests.analysis.synthetic_cache import Row, cache_dataset, mcq_rows

SCENARIOS = [
    # (scenario id, kind, order asked, credences in *asked* order)
    ("norm", "normalisation", "1,0", [0.5, 0.6]),  # listed: P(A)=0.6, P(not A)=0.5 -> 0.1
    ("mono", "monotonicity", "0,1,2", [0.3, 0.2, 0.4]),  # one drop of 0.1
    ("ext", "extensionality", "0,1", [0.7, 0.7]),  # coherent
]


def _dataset(deliveries: tuple[str, ...] = ("single-turn",)) -> list[Row]:
    rows: list[Row] = []
    for d in deliveries:
        shift = 0.0 if d == "single-turn" else 0.1
        for e, (sid, kind, order, cred) in enumerate(SCENARIOS):
            truth = {"scenario": sid, "kind": kind, "order": order, "domain": "x"}
            for t, c in enumerate(cred):
                c2 = min(c + shift, 0.95) if kind == "normalisation" else c
                rows += mcq_rows([c2, 1 - c2], episode=e, turn=t, probe="credence",
                                 labels=("Yes", "No"), delivery=d, truth=truth,
                                 bias=[0.5, -0.5])
    return rows


def test_listed_order() -> None:
    listed = listed_order(np.array([0.1, 0.2, 0.3]), "2,0,1")
    assert listed is not None
    np.testing.assert_allclose(listed, [0.2, 0.3, 0.1])
    assert listed_order(np.array([0.1, np.nan]), "0,1") is None
    assert listed_order(np.array([0.1]), "0,1") is None


def test_scores_per_scenario() -> None:
    scores = scenario_scores(cache_dataset(_dataset())).sel(delivery="single-turn")
    assert scores["credence"].dims == ("episode", QUESTION)
    by_id = {str(s): scores.sel(episode=e) for e, s in zip(
        scores["episode"].values, scores["scenario"].values, strict=True)}
    norm, mono, ext = by_id["norm"], by_id["mono"], by_id["ext"]
    assert bool(norm["scored"]) and str(norm["kind"].values) == "normalisation"
    np.testing.assert_allclose(norm["credence"].values[:2], [0.6, 0.5])
    assert np.isnan(norm["credence"].values[2:]).all()
    assert float(norm["hand_loss"]) == pytest.approx(0.1)
    assert float(norm["lp_loss"]) == pytest.approx(0.1, abs=1e-7) and not bool(norm["coherent"])
    assert float(mono["hand_loss"]) == pytest.approx(0.1)
    assert float(mono["lp_loss"]) >= float(mono["hand_loss"]) - 1e-9
    assert not bool(mono["coherent"])
    assert float(ext["hand_loss"]) == pytest.approx(0.0, abs=1e-9) and bool(ext["coherent"])


def test_metrics_are_xarray_with_named_dims() -> None:
    ds = cache_dataset(_dataset(("single-turn", "multi-turn")))
    scores = scenario_scores(ds)
    assert isinstance(scores, xr.Dataset)
    assert dict(scores.sizes) == {"delivery": 2, "episode": 3, QUESTION: 3}
    for name in ("scored", "hand_loss", "lp_loss", "coherent"):
        assert scores[name].dims == ("delivery", "episode"), name
    assert scores["lp_stakes"].dims == ("delivery", "episode", QUESTION)
    assert scores["kind"].dims == ("episode",)
    summary = kind_summary(scores)
    assert isinstance(summary, xr.Dataset)
    assert all(summary[v].dims == ("kind", "delivery") for v in summary.data_vars)


def test_kind_summary_sides_by_delivery() -> None:
    scores = scenario_scores(cache_dataset(_dataset(("single-turn", "multi-turn"))))
    summary = kind_summary(scores)
    assert list(summary["delivery"].values) == ["multi-turn", "single-turn"]
    single = summary.sel(delivery="single-turn")
    multi = summary.sel(delivery="multi-turn")
    assert float(single["loss_mean"].sel(kind="normalisation")) == pytest.approx(0.1)
    # multi-turn credences were shifted up by 0.1 on normalisation: loss 0.7 + 0.6 - 1 = 0.3
    assert float(multi["loss_mean"].sel(kind="normalisation")) == pytest.approx(0.3)
    assert float(single["loss_mean"].sel(kind="all")) == pytest.approx(0.2 / 3)
    assert float(single["material_rate"].sel(kind="all")) == pytest.approx(2 / 3)
    assert float(single["incoherent_rate"].sel(kind="extensionality")) == 0.0
    assert int(single["n"].sel(kind="all")) == 3
    assert MATERIAL_LOSS < 0.1
