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
from belieflens.interventions.readouts import Selection, oracle_mean, read_study, study_resid


def test_a_decoder_on_held_out_rows_is_at_chance_after_leace(tiny_study: Path) -> None:
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
    assert float(ds["decoder_r2_erased"].sel(layer=1)) < 1e-6
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


def test_erasing_every_position_fits_on_every_position(tiny_model: Any,
                                                       tiny_study: Path) -> None:
    """``--at all`` fits its eraser on the positions it edits (issue 31: the answer
    position's eraser was applied at every position): after fold k's eraser no position of
    the other folds' read-outs covaries with the concept (LEACE's guarantee on its own data),
    which the answer position's eraser does not give."""
    import torch

    from belieflens.interventions.erase import fit_all, fit_every_position
    from belieflens.interventions.forward import RowBatch, clean_run
    from belieflens.interventions.readouts import oracle_mean

    study = read_study(tiny_study)
    rows = Selection(turns=(1, 2)).rows(study)
    options = EraseOptions(layers=(2,), n_folds=2, batch_size=32, at="all")
    folds, at_answer_ = fit_all(study, rows, (2,), options)
    (every,) = fit_every_position(tiny_model, study, rows, folds, at_answer_, 32,
                                  np.random.default_rng(0))
    target = oracle_mean(study.table)[rows]
    batch = RowBatch.of([study.queries[q] for q in rows])
    with torch.inference_mode():
        resid = clean_run(tiny_model, batch).resid[2].double().numpy()
    for k in range(2):
        xs, zs = [], []
        for b, (r, n) in enumerate(zip(batch.rows, batch.lengths(), strict=True)):
            if folds[r.query] != k:
                xs.append(resid[b, :n])
                zs.append(np.full(n, target[r.query]))
        x, z = np.concatenate(xs), np.concatenate(zs)
        before = np.linalg.norm((x - x.mean(0)).T @ (z - z.mean()))
        left = [np.linalg.norm((e - e.mean(0)).T @ (z - z.mean())) / before
                for e in (every.erasers[k].apply(x), at_answer_[0].erasers[k].apply(x))]
        assert left[0] < 1e-6 and left[1] > 0.5, left
        assert every.controls[k].rank == every.erasers[k].rank
    assert every.r2_clean == at_answer_[0].r2_clean  # the held-out R² stay the answer's
    ds = erase_logprobs(tiny_model, study, rows, options)
    assert ds.attrs["at"] == "all" and "every position" in ds["erased_logprob"].attrs[
        "description"]
    assert float(abs(ds["erased_logprob"] - ds["clean_logprob"]).max()) > 1e-5
