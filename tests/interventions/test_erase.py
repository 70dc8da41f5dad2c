"""LEACE erasure on the tiny random model: the concept becomes unreadable, and the erased
forward is the eraser's matrix applied at the answer position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from belieflens.interventions.directions import episode_folds, heldout_r2, leace
from belieflens.interventions.erase import EraseOptions, erase_logprobs, fit_all
from belieflens.interventions.forward import RowBatch, at_answer, clean_run, run_from, with_answer
from belieflens.interventions.study import Selection, oracle_mean, read_study, study_resid


def test_a_probe_on_held_out_rows_is_at_chance_after_leace(tiny_study: Path) -> None:
    study = read_study(tiny_study)
    z = oracle_mean(study.table)
    x = study_resid(study, [1])[:, 0, :]
    folds, _ = episode_folds(np.asarray(study.table["episode"].values), 4,
                             np.random.default_rng(0))
    assert heldout_r2(x, z, folds, erase=False) > 0.5
    assert abs(heldout_r2(x, z, folds, erase=True)) < 1e-6
    er = leace(x, z)
    xe = er.apply(x)
    cov = ((xe - xe.mean(0)) * (z - z.mean())[:, None]).mean(0)
    assert float(np.abs(cov).max()) < 1e-8


def test_erased_forward_equals_the_eraser_matrix_applied(tiny_model: Any,
                                                          tiny_study: Path) -> None:
    study = read_study(tiny_study)
    rows = Selection(turns=(2,)).rows(study)
    options = EraseOptions(layers=(1,), n_folds=2, batch_size=32)
    ds = erase_logprobs(tiny_model, study, rows, options)
    assert float(ds["probe_r2_erased"].sel(layer=1)) < 1e-6
    folds, fitted = fit_all(study, rows, [1], options)
    np.testing.assert_array_equal(folds, ds["fold"].values)
    batch = RowBatch.of([study.queries[q] for q in rows])
    res = clean_run(tiny_model, batch).resid[1]
    x = at_answer(res, batch).double().numpy()
    manual = np.stack([
        fitted[0].erasers[f].matrix() @ (x[i] - fitted[0].erasers[f].bias)
        + fitted[0].erasers[f].bias for i, f in enumerate(folds)
    ])
    expect = run_from(tiny_model, batch, 1, with_answer(res, batch, torch.as_tensor(manual)))
    np.testing.assert_allclose(ds["erased_logprob"].sel(layer=1).values, expect, atol=1e-4)
    assert not np.allclose(manual, x)
    assert (ds["eraser_rank"].values == 1).all()


def test_erasing_every_position_at_the_last_layer_is_erasing_the_answer(
    tiny_model: Any, tiny_study: Path
) -> None:
    study = read_study(tiny_study)
    rows = Selection(turns=(2,)).rows(study)
    last = tiny_model.info.n_layers
    at_answer_ = erase_logprobs(tiny_model, study, rows,
                                EraseOptions(layers=(last,), n_folds=2, batch_size=32))
    at_all = erase_logprobs(tiny_model, study, rows,
                            EraseOptions(layers=(last,), n_folds=2, batch_size=32, at="all"))
    for var in ("erased_logprob", "control_logprob"):
        np.testing.assert_allclose(at_all[var].values, at_answer_[var].values, atol=1e-4)
