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
    """``--at all`` fits an eraser per position role on the positions it edits (the answer
    position's eraser was once applied at every position, then one eraser of the pooled
    concept): after fold k's erasers, within every role the other folds' positions no longer
    covary with the concept (the guarantee on its own data), which the answer position's
    eraser does not give."""
    import torch

    from belieflens.analysis.interventions import erase_summary
    from belieflens.interventions.erase import fit_all, fit_every_position
    from belieflens.interventions.erase_report import erase_text
    from belieflens.interventions.forward import RowBatch, clean_run
    from belieflens.interventions.positions import VARIANT, row_roles
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
    keys = [row_roles(batch.queries[r.query], int(n))
            for r, n in zip(batch.rows, batch.lengths(), strict=True)]
    index = every.index
    assert index is not None and index.size > 10  # many roles, not one pooled mixture
    for k in range(2):
        mine = [b for b, r in enumerate(batch.rows) if folds[r.query] != k]
        x = np.concatenate([resid[b, : len(keys[b])] for b in mine])
        z = np.concatenate([np.full(len(keys[b]), target[batch.rows[b].query]) for b in mine])
        col = np.concatenate([index.ids(keys[b]) for b in mine])
        left: list[list[float]] = [[], []]
        for j, e in enumerate((every.erasers[k].apply(x, col), at_answer_[0].erasers[k].apply(x))):
            for c in np.unique(col):
                m = col == c
                if np.ptp(z[m]) > 0 and np.abs((x[m] - x[m].mean(0)).T @ (z[m] - z[m].mean())
                                               ).max() > 1e-9:
                    before = np.linalg.norm((x[m] - x[m].mean(0)).T @ (z[m] - z[m].mean()))
                    after = np.linalg.norm((e[m] - e[m].mean(0)).T @ (z[m] - z[m].mean()))
                    left[j].append(float(after / before))
        assert max(left[0]) < 1e-6 and max(left[1]) > 0.5, (max(left[0]), max(left[1]))
        assert every.controls[k].rank == every.erasers[k].rank == 1
        assert every.controls[k].roles == every.erasers[k].roles
    assert every.r2_clean == at_answer_[0].r2_clean  # the answer position's, before erasure
    ds = erase_logprobs(tiny_model, study, rows, options)
    assert ds.attrs["at"] == "all" and "every position" in ds["erased_logprob"].attrs[
        "description"]
    # the file, and so its report, names the eraser: the orthogonal variant, not full LEACE
    assert ds.attrs["eraser"] == VARIANT and "Not full LEACE" in VARIANT
    assert f"eraser: {VARIANT}" in erase_text({"summary": erase_summary(ds)}, ds)
    assert float(abs(ds["erased_logprob"] - ds["clean_logprob"]).max()) > 1e-5
    # the R² reported are those of the eraser applied, at the answer and every checked role
    assert "position roles checked" in ds.attrs["decoder_r2_positions"]
    clean_max, erased_max = (float(ds[v].sel(layer=2)) for v in (
        "decoder_r2_clean_max", "decoder_r2_erased_max"))
    assert clean_max > 0.5 and erased_max < clean_max, (clean_max, erased_max)
    assert np.isfinite(float(ds["decoder_r2_erased"].sel(layer=2)))
    assert int(ds["eraser_rank"].sel(layer=2)) == 1 and int(ds["eraser_roles"].sel(layer=2)) > 10
    # the forward run is the erasers applied at every position of each row, by its role
    from belieflens.interventions.forward import run_from

    full = resid.copy()
    for b, (r, n) in enumerate(zip(batch.rows, batch.lengths(), strict=True)):
        er = every.erasers[int(ds["fold"].values[r.query])]
        full[b, :n] = er.apply(resid[b, :n], index.ids(keys[b]))
    expect = run_from(tiny_model, batch, 2, torch.as_tensor(full, dtype=torch.float32))
    np.testing.assert_allclose(ds["erased_logprob"].sel(layer=2).values, expect, atol=1e-4)
