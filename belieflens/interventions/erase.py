"""Erasure: LEACE of the oracle concept at layer l, applied at the answer position.

At each layer the concept (each read-out's oracle point estimate,
:func:`belieflens.interventions.readouts.oracle_mean`) is erased from the residual stream at the
answer position with LEACE (``concept_erasure``), fitted on the study's own residuals there,
with folds grouped by episode and **cross-fitted**: a read-out is erased by the eraser fitted
on the other folds' episodes. ``at="all"`` erases every position of a read-out's forward rows,
with an eraser fitted on the positions it edits: every position of the other folds'
read-outs, each labelled with its read-out's concept (:func:`fit_every_position`; the
residuals come from the model, streamed into one LEACE fit per layer and fold). The control
erases a random subspace of the same rank (an orthogonal projection around the training
mean), seeded. Only blocks ``l..L-1`` run on the erased residual, from the first erased
position on (:func:`belieflens.interventions.forward.run_edited`).

Variables: ``erased_logprob`` and ``control_logprob[query, layer, option]``,
``clean_logprob[query, option]``, ``prior_logprob[query, option]`` (the study's output at turn
0 of the same episode, delivery, probe and rotation: the model's belief before any evidence,
what erasing the evidence should move the output toward), ``study_query[query]``, ``fold``
of each read-out, and per layer ``eraser_rank``, ``decoder_r2_clean`` and
``decoder_r2_erased`` (held-out R² of a ridge decoder of the concept before and after erasure,
:func:`belieflens.interventions.directions.heldout_r2`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar, Literal, get_args

import numpy as np
import xarray as xr

from belieflens.dims import LAYER, OPTION, QUERY
from belieflens.errors import ParameterError, at_least, choice
from belieflens.interventions.directions import (
    Eraser,
    episode_folds,
    eraser_of,
    heldout_r2,
    leace,
    random_eraser,
    random_eraser_at,
)
from belieflens.interventions.forward import RowBatch, at_answer, clean_run, run_edited, with_answer
from belieflens.interventions.model import layer_list
from belieflens.interventions.readouts import (
    Selection,
    StudyReadouts,
    oracle_mean,
    study_resid,
    with_table,
)
from belieflens.interventions.run import Plan
from belieflens.model.load import LoadedModel
from belieflens.store.results import Kind

EraseAt = Literal["answer", "all"]
"""Positions an eraser is applied at."""

ERASE_AT: tuple[EraseAt, ...] = get_args(EraseAt)


@dataclass(frozen=True)
class EraseOptions:
    """How to erase: layers, folds (grouped by episode), batch size, seed, positions.

    Passed to :func:`belieflens.erase`; the result file holds ``erased_logprob`` and
    ``control_logprob[query, layer, option]``. ``n_folds`` needs as many episodes in the
    study.

    Examples:
        >>> options = belieflens.EraseOptions(layers=(15,), n_folds=2)
        >>> options.layers, options.at
        ((15,), 'answer')
    """

    kind: ClassVar[Kind] = "intervention-erase"
    need: ClassVar[tuple[str, ...]] = ("resid",)

    layers: tuple[int, ...] | None = None
    n_folds: int = 5
    batch_size: int = 8
    seed: int = 0
    at: EraseAt = "answer"
    """Where the eraser is applied: the answer position, or every position of the row."""

    def __post_init__(self) -> None:
        at_least("--batch-size", self.batch_size, 1)
        at_least("--folds", self.n_folds, 2)
        choice("--at", self.at, ERASE_AT)

    def plan(self, study: StudyReadouts, select: Selection) -> Plan:
        """Erase the concept from the selected read-outs (:func:`erase_logprobs`)."""
        rows = select.rows(study)
        return Plan({**asdict(self), **asdict(select)}, lambda model, progress: erase_logprobs(
            model, study, rows, self, on_progress=progress))


@dataclass(frozen=True, eq=False)
class LayerErasers:
    """One layer's cross-fitted erasers: ``erasers[k]`` was fitted without fold ``k``."""

    layer: int
    erasers: tuple[Eraser, ...]
    controls: tuple[Eraser, ...]
    r2_clean: float
    r2_erased: float


def fit_erasers(study: StudyReadouts, rows: np.ndarray, folds: np.ndarray, n_folds: int, layer: int,
                rng: np.random.Generator) -> LayerErasers:
    """LEACE erasers (one per fold, each fitted on the other folds' rows with an oracle) and
    random controls of equal rank at ``layer``."""
    target = oracle_mean(study.table)[rows]
    ok = np.isfinite(target)
    x = study_resid(study, [layer], list(rows[ok]))[:, 0, :]
    z, f = target[ok], folds[ok]
    erasers, controls = [], []
    for k in range(n_folds):
        train = f != k if n_folds > 1 else np.ones(f.size, dtype=bool)
        er = leace(x[train], z[train])
        erasers.append(er)
        controls.append(random_eraser(x[train], er.rank, rng))
    r2c = r2e = float("nan")
    if n_folds >= 2:
        r2c = heldout_r2(x, z, f, erase=False)
        r2e = heldout_r2(x, z, f, erase=True)
    return LayerErasers(layer, tuple(erasers), tuple(controls), r2c, r2e)


def fit_all(study: StudyReadouts, rows: np.ndarray, layers: Sequence[int], options: EraseOptions,
            ) -> tuple[np.ndarray, list[LayerErasers]]:
    """The fold of each row (grouped by episode, seeded by ``options.seed``) and the
    cross-fitted erasers of every layer: what :func:`erase_logprobs` applies."""
    target = oracle_mean(study.table)[rows]
    if np.isfinite(target).sum() < 3:
        raise ParameterError("fewer than 3 selected read-outs have an oracle: nothing to fit "
                             "an eraser on")
    rng = np.random.default_rng(options.seed)
    groups = np.asarray(study.table["episode"].values)[rows]
    folds, k = episode_folds(groups, options.n_folds, rng)
    return folds, [fit_erasers(study, rows, folds, k, layer, rng) for layer in layers]


def fit_every_position(model: LoadedModel, study: StudyReadouts, rows: np.ndarray,
                       folds: np.ndarray, fitted: list[LayerErasers], batch_size: int,
                       rng: np.random.Generator) -> list[LayerErasers]:
    """``fitted`` with its erasers and controls refitted on every position (``at="all"``):
    eraser ``k`` of a layer on the residuals at every real position of every forward row of
    the rows outside fold ``k`` that have an oracle, each position labelled with its
    read-out's concept; the controls around those positions' mean. The held-out R² stay the
    answer position's."""
    import torch
    from concept_erasure import LeaceFitter

    target = oracle_mean(study.table)[rows]
    ok = np.flatnonzero(np.isfinite(target))
    # standardised: LEACE's rank cut (svd_tol) is absolute, and the concept is one signal
    # among every position's variance; erasing z or a z + b erases the same subspace
    target = (target - np.mean(target[ok])) / max(float(np.std(target[ok])), 1e-12)
    n_folds, d = len(fitted[0].erasers), model.info.d_model
    fitters = [[LeaceFitter(d, 1, dtype=torch.float64) for _ in range(n_folds)] for _ in fitted]
    sums, counts = np.zeros((len(fitted), n_folds, d)), np.zeros(n_folds)
    for start in range(0, ok.size, batch_size):
        idx = ok[start : start + batch_size]
        batch = RowBatch.of([study.queries[q] for q in rows[idx]])
        run = clean_run(model, batch, keep_cache=False)
        for b, (r, n) in enumerate(zip(batch.rows, batch.lengths(), strict=True)):
            i = int(idx[r.query])
            train = [k for k in range(n_folds) if n_folds == 1 or folds[i] != k]
            z = torch.full((int(n), 1), float(target[i]), dtype=torch.float64)
            counts[train] += n
            for li, f in enumerate(fitted):
                x = run.resid[f.layer][b, : int(n)].to(torch.float64).cpu()
                for k in train:
                    fitters[li][k].update(x, z)
                    sums[li, k] += x.sum(0).numpy()
        del run
    out = []
    for li, f in enumerate(fitted):
        erasers = tuple(eraser_of(fitters[li][k], d) for k in range(n_folds))
        controls = tuple(random_eraser_at(sums[li, k] / max(counts[k], 1.0), e.rank, rng)
                         for k, e in enumerate(erasers))
        out.append(LayerErasers(f.layer, erasers, controls, f.r2_clean, f.r2_erased))
    return out


def prior_rows(study: StudyReadouts, rows: np.ndarray) -> np.ndarray:
    """For each row, the study query at turn 0 with the same episode, delivery, probe and
    rotation (-1 where there is none)."""
    t = study.table
    key = list(zip(*(np.asarray(t[n].values).tolist()
                     for n in ("episode", "delivery", "probe", "rotation")), strict=True))
    turn = np.asarray(t["turn"].values)
    at0 = {k: i for i, k in enumerate(key) if turn[i] == 0}
    return np.array([at0.get(key[q], -1) for q in rows], dtype=np.int64)


def erase_logprobs(model: LoadedModel, study: StudyReadouts, rows: np.ndarray,
                   options: EraseOptions = EraseOptions(), *,
                   on_progress: Callable[[int, int], None] | None = None) -> xr.Dataset:
    """Erase the concept at every layer of ``options`` for the study's read-outs ``rows``."""
    import torch

    layers = layer_list(options.layers, model.info.n_layers)
    folds, fitted = fit_all(study, rows, layers, options)
    if options.at == "all":
        fitted = fit_every_position(model, study, rows, folds, fitted, options.batch_size,
                                    np.random.default_rng([options.seed, 1]))
    n_opt = max(len(study.queries[q].option_ids) for q in rows)
    erased = np.full((rows.size, len(layers), n_opt), np.nan)
    control = np.full_like(erased, np.nan)
    clean = np.full((rows.size, n_opt), np.nan)
    for start in range(0, rows.size, options.batch_size):
        chunk = rows[start : start + options.batch_size]
        sl = slice(start, start + chunk.size)
        fk = folds[sl]
        batch = RowBatch.of([study.queries[q] for q in chunk])
        run = clean_run(model, batch)
        clean[sl, : run.logprob.shape[1]] = run.logprob
        tiled = batch.tile(2)
        first = _row_query(batch)
        for li, layer in enumerate(layers):
            res = run.resid[layer]
            edited = []
            if options.at == "all":
                full = res.double().cpu().numpy()
                for kind in (fitted[li].erasers, fitted[li].controls):
                    new = np.stack([kind[int(fk[first[r]])].apply(full[r])
                                    for r in range(full.shape[0])])
                    edited.append(torch.as_tensor(new, device=res.device, dtype=res.dtype))
            else:
                ans = at_answer(res, batch).double().cpu().numpy()
                for kind in (fitted[li].erasers, fitted[li].controls):
                    new = np.stack([kind[int(fk[first[r]])].apply(ans[r : r + 1])[0]
                                    for r in range(ans.shape[0])])
                    edited.append(with_answer(res, batch, torch.as_tensor(new,
                                                                           device=res.device)))
            lp = run_edited(model, tiled, layer, torch.cat(edited), run)
            lp = lp.reshape(2, chunk.size, -1)
            erased[sl, li, : lp.shape[-1]] = lp[0]
            control[sl, li, : lp.shape[-1]] = lp[1]
        del run
        if on_progress is not None:
            on_progress(start + chunk.size, rows.size)
    prior_q = prior_rows(study, rows)
    study_lp = np.asarray(study.table["option_logprob"].values, dtype=np.float64)[:, :n_opt]
    prior = np.where(prior_q[:, None] >= 0, study_lp[np.maximum(prior_q, 0)], np.nan)
    ds = xr.Dataset(
        {
            "erased_logprob": ((QUERY, LAYER, OPTION), erased),
            "control_logprob": ((QUERY, LAYER, OPTION), control),
            "clean_logprob": ((QUERY, OPTION), clean),
            "prior_logprob": ((QUERY, OPTION), prior),
            "study_query": (QUERY, rows.astype(np.int32)),
            "fold": (QUERY, folds.astype(np.int32)),
            "eraser_rank": (LAYER, np.array([f.erasers[0].rank for f in fitted], np.int32)),
            "decoder_r2_clean": (LAYER, np.array([f.r2_clean for f in fitted])),
            "decoder_r2_erased": (LAYER, np.array([f.r2_erased for f in fitted])),
        },
        coords={LAYER: np.asarray(layers, dtype=np.int32)},
    )
    where = "the answer position" if options.at == "answer" else "every position"
    ds.attrs["at"] = options.at
    ds["erased_logprob"].attrs["description"] = (
        f"log P(option) with the oracle concept LEACE-erased at {where} of layer l "
        f"(eraser fitted at {where} of the other folds' episodes)")
    ds["control_logprob"].attrs["description"] = (
        "log P(option) with a random subspace of equal rank erased instead")
    ds["prior_logprob"].attrs["description"] = (
        "the study's log P(option) at turn 0 of the same episode, delivery, probe, rotation")
    return with_table(ds, study.select(rows), n_opt)


def _row_query(batch: RowBatch) -> np.ndarray:
    """The query of each row of ``batch``."""
    return np.array([r.query for r in batch.rows], dtype=np.int64)
