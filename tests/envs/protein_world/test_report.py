"""ProteinWorld section on synthetic read-outs: KL to the oracle, downstream gap, choices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from belieflens.envs.protein_world.metrics import (
    choice_counts,
    stated_tally,
    step_metrics,
    step_summary,
)
from belieflens.envs.protein_world.report import format_steps, protein_world_section
from tests.analysis.synthetic_cache import Row, cache_dataset, mcq_rows

CLASSES = ("Vorin", "Dase", "Kulin")
EXPERIMENTS = ("measure a", "measure b")


def _rows() -> list[Row]:
    rows: list[Row] = []
    # (theta, model class beliefs per turn, oracle per turn, p_active per turn, next beliefs)
    episodes = [
        (0, [[0.5, 0.3, 0.2], [0.6, 0.2, 0.2]], [[0.4, 0.4, 0.2], [0.8, 0.1, 0.1]],
         [0.4, 0.9], [0.7, 0.3], "measure a", [0.5, 0.2]),
        (2, [[0.3, 0.3, 0.4], [0.2, 0.2, 0.6]], [[0.3, 0.3, 0.4], [0.1, 0.1, 0.8]],
         [0.4, 0.7], [0.3, 0.7], "measure a", [0.6, 0.1]),
    ]
    for e, (theta, model, oracle, active, nxt, best, eig) in enumerate(episodes):
        truth: dict[str, float | str] = {
            "theta_index": float(theta), "best_experiment_0": best,
            "p_active_true_0": active[0], "p_active_true_1": active[1],
            "eig_0_0": eig[0], "eig_0_1": eig[1],
        }
        for t in range(2):
            rows += mcq_rows(model[t], episode=e, turn=t, probe="class", labels=CLASSES,
                             oracle=oracle[t], truth=truth, bias=[1.0, 0.0, -1.0])
        rows += mcq_rows(nxt, episode=e, turn=0, probe="next-experiment", labels=EXPERIMENTS,
                         truth=truth, bias=[0.3, -0.3])
    return rows


def test_step_metrics() -> None:
    m = step_metrics(cache_dataset(_rows())).sel(delivery="single-turn")
    kl0 = 0.4 * np.log(0.4 / 0.5) + 0.4 * np.log(0.4 / 0.3) + 0.2 * np.log(0.2 / 0.2)
    assert float(m["kl"].sel(episode=0, turn=0)) == pytest.approx(kl0)
    assert float(m["kl"].sel(episode=1, turn=0)) == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(m["p_model_true"].sel(turn=1).values, [0.6, 0.6])
    np.testing.assert_allclose(m["p_passive_true"].sel(turn=1).values, [0.8, 0.8])
    np.testing.assert_allclose(m["gap_revealed"].sel(turn=1).values, [0.9 - 0.6, 0.7 - 0.6])
    np.testing.assert_allclose(m["choice_match"].sel(turn=0).values, [1.0, 0.0])
    np.testing.assert_allclose(m["p_best"].sel(turn=0).values, [0.7, 0.3])
    np.testing.assert_allclose(m["eig_regret"].sel(turn=0).values, [0.0, 0.5])
    assert bool(m["choice_match"].sel(turn=1).isnull().all())  # no next probe at the last turn


def test_summary_and_section(tmp_path: Path) -> None:
    ds = cache_dataset(_rows())
    s = step_summary(step_metrics(ds)).sel(delivery="single-turn")
    assert float(s["gap_revealed_mean"].sel(turn=1)) == pytest.approx(0.2)
    assert float(s["gap_revealed_sem"].sel(turn=1)) == pytest.approx(0.1)
    assert int(s["n"].sel(turn=0)) == 2
    table = format_steps(step_summary(step_metrics(ds)))
    assert "[single-turn]" in table and "EIG regret" in table
    sec = protein_world_section(ds, tmp_path, method="geometric")
    assert sec.files == (tmp_path / "protein_world_steps.png",)
    assert sec.files[0].stat().st_size > 1000
    assert "0.200±0.100" in sec.text


def test_metrics_are_xarray_with_named_dims() -> None:
    ds = cache_dataset(_rows())
    m = step_metrics(ds)
    assert isinstance(m, xr.Dataset)
    assert m["kl"].dims == ("delivery", "episode", "turn")
    assert set(m["choice_match"].dims) == {"delivery", "episode", "turn"}
    s = step_summary(m)
    assert s["kl_mean"].dims == ("delivery", "turn") and s["n"].dims == ("delivery", "turn")
    assert stated_tally(m).data_vars.keys() == set()  # no stated read-out in this file
    assert choice_counts(ds).data_vars.keys() == set()  # nor model-chosen experiments
