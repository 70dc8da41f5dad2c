"""Recommender section on a synthetic cache file with known beliefs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from belieflens.envs import sections_for
from belieflens.envs.recommender.metrics import after_evidence, recommender_scores, score_table
from belieflens.envs.recommender.report import recommender_section
from tests.analysis.synthetic_cache import Row, cache_dataset, mcq_rows

STARS = tuple(f"{s} stars" for s in range(1, 6))
TYPES = ("Type 1", "Type 2")
P_TYPE = [0.75, 0.25]
ORACLE_Y = [0.1, 0.2, 0.4, 0.2, 0.1]  # E = 3
MODEL_Y = [0.1, 0.1, 0.2, 0.3, 0.3]  # E = 3.6; TVD to the oracle 0.3
COND = ([0.6, 0.1, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.1, 0.6])  # E = 2 and 4


def _rows(deliveries: tuple[str, ...] = ("single-turn",)) -> list[Row]:
    rows: list[Row] = []
    truth = {"target_rating": 5.0, "type": 0.0}
    for d in deliveries:
        for t in (0, 1):
            kw = dict(episode=0, turn=t, delivery=d, truth=truth, bias=None)
            rows += mcq_rows(P_TYPE, probe="type", labels=TYPES, oracle=P_TYPE, **kw)  # type: ignore[arg-type]
            rows += mcq_rows(MODEL_Y, probe="rating", labels=STARS, oracle=ORACLE_Y, **kw)  # type: ignore[arg-type]
            for k, q in enumerate(COND):
                rows += mcq_rows(q, probe=f"rating|type={k}", labels=STARS, oracle=q, **kw)  # type: ignore[arg-type]
    return rows


def test_scores_match_hand_computation() -> None:
    sc = recommender_scores(cache_dataset(_rows(), {"env_name": "recommender"}))
    at = sc.isel(delivery=0, episode=0, turn=1)
    expect = {
        "tvd_z": 0.0, "tvd_y": 0.3, "mae_y": 0.6,
        "tvd_y_argmax": 0.5, "mae_y_argmax": 1.0,  # type 1's table: E = 2
        "tvd_y_marginal": 0.5, "mae_y_marginal": 0.5,  # 0.75 * 2 + 0.25 * 4 = 3.5
        "mae_y_true": 1.4,  # |3.6 - 5|
    }
    for name, value in expect.items():
        assert float(at[name]) == pytest.approx(value, abs=1e-9), name


def test_section_text_and_plot(tmp_path: Path) -> None:
    ds = cache_dataset(_rows(("single-turn", "multi-turn")), {"env_name": "recommender"})
    (fn,) = sections_for("recommender")
    sec = fn(ds, tmp_path, method="geometric")
    assert sec is not None and sec.title == "Recommender: type and rating"
    lines = sec.text.splitlines()
    assert lines[0].split()[:4] == ["delivery", "turn", "tvd_z", "tvd_y"]
    assert sum(line.startswith("multi-turn") for line in lines) == 2
    assert "tvd_y 0.300" in sec.text and "mae_y_argmax 1.000" in sec.text
    assert [p.name for p in sec.files] == ["recommender.png"] and sec.files[0].stat().st_size
    assert "recommender.png" in sec.markdown
    assert recommender_section(ds, None).files == ()


def test_without_conditional_probes() -> None:
    rows = [r for r in _rows() if not r.probe.startswith("rating|")]
    sc = recommender_scores(cache_dataset(rows))
    assert "tvd_y_argmax" not in sc and np.isclose(float(sc["tvd_y"].max()), 0.3)


def test_metrics_are_xarray_with_named_dims() -> None:
    sc = recommender_scores(cache_dataset(_rows(("single-turn", "multi-turn"))))
    assert isinstance(sc, xr.Dataset)
    assert all(sc[v].dims == ("delivery", "episode", "turn") for v in sc.data_vars)
    table = score_table(sc)
    assert table["tvd_y_mean"].dims == ("delivery", "turn") and table["n"].dims == table[
        "tvd_y_mean"].dims
    overall = after_evidence(table)
    assert list(overall.data_vars)[:2] == ["tvd_z", "tvd_y"]
    assert all(overall[v].dims == () for v in overall.data_vars)
    assert float(overall["tvd_y"]) == pytest.approx(0.3)
