"""Erasure: LEACE of the oracle concept at layer l, applied at the answer position.

At each layer the concept (each read-out's oracle point estimate,
:func:`belieflens.interventions.readouts.oracle_mean`) is erased from the residual stream at the
answer position with LEACE (``concept_erasure``), fitted on the study's own residuals there,
with folds grouped by episode and **cross-fitted**: a read-out is erased by the eraser fitted
on the other folds' episodes. ``at="all"`` erases every position of a read-out's forward rows
with **an eraser per position role** (the position's segment of the episode and its offset
there), each fitted on that role's positions of the other folds' read-outs
(:func:`fit_every_position`, :mod:`.positions`; the residuals come from the model, streamed
into sums per role, layer and fold). One eraser of the concept pooled over positions leaves
it readable at each position where positions carry it along different axes; per role, no
position's decoder reads it. The control
erases a random subspace of the same rank (an orthogonal projection around the training
mean), seeded. Only blocks ``l..L-1`` run on the erased residual, from the first erased
position on (:func:`belieflens.interventions.forward.run_edited`).

Variables: ``erased_logprob`` and ``control_logprob[query, layer, option]``,
``clean_logprob[query, option]``, ``prior_logprob[query, option]`` (the study's output at turn
0 of the same episode, delivery, probe and rotation: the model's belief before any evidence,
what erasing the evidence should move the output toward), ``study_query[query]``, ``fold``
of each read-out, and per layer ``eraser_rank`` (with ``at="all"`` the rank at each position,
and ``eraser_roles`` the roles with an eraser), ``decoder_r2_clean`` and ``decoder_r2_erased``
(held-out R² of a ridge decoder of the concept at the answer position before and after the
eraser **applied**, :func:`belieflens.interventions.directions.heldout_r2`); with
``at="all"`` also ``decoder_r2_clean_max`` and ``decoder_r2_erased_max``, the largest held-out
R² of a decoder at one position role among those checked (:class:`PositionSamples`).
``attrs["eraser"]`` names the eraser: LEACE at the answer position; with ``at="all"`` the
orthogonal variant per role (:data:`~.positions.VARIANT`: not full LEACE, and why).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, get_args

import numpy as np
import xarray as xr

from belieflens.dims import LAYER, OPTION, QUERY
from belieflens.errors import ParameterError, at_least, choice
from belieflens.interventions.directions import (
    episode_folds,
    heldout_r2,
    leace,
    random_eraser,
)
from belieflens.interventions.erase_report import ERASE
from belieflens.interventions.forward import RowBatch, at_answer, clean_run, run_edited, with_answer
from belieflens.interventions.model import layer_list
from belieflens.interventions.positions import (
    MIN_ROLE_ROWS,
    VARIANT,
    RoleIndex,
    RoleKey,
    RoleStats,
    heldout_position_r2,
    random_role_erasers,
    role_erasers,
    row_roles,
)
from belieflens.interventions.readouts import (
    Selection,
    StudyReadouts,
    oracle_mean,
    study_resid,
    with_table,
)
from belieflens.interventions.run import Plan
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.rows import forward_rows

CHECK_BYTES = 256 * 2**20
"""Memory for the residuals of the per-position R² check of ``at="all"`` (clean and erased,
every layer): the number of positions checked is what fits."""

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

    kind: ClassVar[str] = ERASE.name
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
    erasers: tuple[Any, ...]
    """Per fold an :class:`~.directions.Eraser` (the answer position) or
    :class:`~.positions.RoleErasers` (every position, with ``index``)."""
    controls: tuple[Any, ...]
    r2_clean: float
    r2_erased: float
    index: RoleIndex | None = None
    """The role columns of ``at="all"``'s erasers."""


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
    """``fitted`` with erasers and controls for every position (``at="all"``): per fold ``k``
    and layer, one eraser per position role (:mod:`belieflens.interventions.positions`),
    fitted on that role's positions in every forward row of the rows outside fold ``k`` that
    have an oracle; the controls project a random direction out per role instead. The
    held-out R² are filled in by :func:`erase_logprobs`, on what the applied erasers leave."""
    import torch

    target = oracle_mean(study.table)[rows]
    ok = np.flatnonzero(np.isfinite(target))
    n_folds, d = len(fitted[0].erasers), model.info.d_model
    index = RoleIndex.of([row_roles(study.queries[rows[i]], len(r.ids))
                          for i in ok for r in forward_rows([study.queries[rows[i]]])])
    stats = [[RoleStats(d, index.size) for _ in range(n_folds)] for _ in fitted]
    for start in range(0, ok.size, batch_size):
        idx = ok[start : start + batch_size]
        batch = RowBatch.of([study.queries[q] for q in rows[idx]])
        run = clean_run(model, batch, keep_cache=False)
        for b, (r, n) in enumerate(zip(batch.rows, batch.lengths(), strict=True)):
            i = int(idx[r.query])
            role = index.ids(row_roles(batch.queries[r.query], int(n)))
            for li, f in enumerate(fitted):
                x = run.resid[f.layer][b, : int(n)].to(torch.float64).cpu().numpy()
                stats[li][int(folds[i]) if n_folds > 1 else 0].update(x, role, float(target[i]))
        del run
    out = []
    for li, f in enumerate(fitted):
        train = [stats[li][0].merged([s for j, s in enumerate(stats[li])
                                      if n_folds == 1 or j != k]) for k in range(n_folds)]
        erasers = tuple(role_erasers(t) for t in train)
        controls = tuple(random_role_erasers(e, rng) for e in erasers)
        out.append(LayerErasers(f.layer, erasers, controls, f.r2_clean, float("nan"), index))
    return out


@dataclass(eq=False)
class PositionSamples:
    """Residuals at the checked positions, clean and erased, per layer (mutable accumulator).

    Units checked: the answer position, and the roles with a column of their own in most
    read-outs, as many as :data:`CHECK_BYTES` holds (most frequent first)."""

    units: list[RoleKey]
    clean: np.ndarray
    erased: np.ndarray

    @classmethod
    def of(cls, study: StudyReadouts, rows: np.ndarray, n_layers: int, d: int) -> PositionSamples:
        """Room for ``rows`` at every layer, for the units the budget holds."""
        seen = Counter(k for q in rows for k in set(row_roles(study.queries[q],
                                                              len(study.queries[q].context_ids))))
        frequent = [k for k, n in sorted(seen.items(), key=lambda kv: (-kv[1], repr(kv[0])))
                    if n >= MIN_ROLE_ROWS]
        per_unit = max(rows.size * d * 4 * 2 * n_layers, 1)
        units: list[RoleKey] = [("answer",), *frequent][: max(1, CHECK_BYTES // per_unit)]
        shape = (n_layers, rows.size, len(units), d)
        return cls(units, np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32))

    def add(self, li: int, row: int, query: TokenizedQuery, clean: np.ndarray,
            erased: np.ndarray) -> None:
        """Keep the checked positions of one read-out's first forward row at layer ``li``."""
        keys = row_roles(query, len(query.context_ids))
        where = {k: p for p, k in enumerate(keys)}
        where[("answer",)] = query.answer_pos
        for u, key in enumerate(self.units):
            if key in where:
                self.clean[li, row, u] = clean[where[key]]
                self.erased[li, row, u] = erased[where[key]]

    def r2(self, concept: np.ndarray, folds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Held-out decoder R² ``[layer, unit]`` before and after erasure (NaN where a unit
        has too few read-outs)."""
        out = np.full((2, *self.clean.shape[:1], len(self.units)), np.nan)
        for li in range(self.clean.shape[0]):
            for u in range(len(self.units)):
                have = np.isfinite(self.clean[li, :, u, 0]) & np.isfinite(concept)
                if have.sum() >= MIN_ROLE_ROWS:
                    for j, x in enumerate((self.clean, self.erased)):
                        out[j, li, u] = heldout_position_r2(
                            x[li, have, u].astype(np.float64), concept[have], folds[have])
        return out[0], out[1]


def prior_rows(study: StudyReadouts, rows: np.ndarray) -> np.ndarray:
    """For each row, the study query at turn 0 with the same episode, delivery, probe and
    rotation (-1 where there is none)."""
    t = study.table
    key = list(zip(*(np.asarray(t[n].values).tolist()
                     for n in ("episode", "delivery", "probe", "rotation")), strict=True))
    turn = np.asarray(t["turn"].values)
    at0 = {k: i for i, k in enumerate(key) if turn[i] == 0}
    return np.array([at0.get(key[q], -1) for q in rows], dtype=np.int64)


@dataclass(eq=False)
class _Outputs:
    """What :func:`erase_logprobs` fills, batch by batch (mutable accumulator)."""

    erased: np.ndarray
    control: np.ndarray
    clean: np.ndarray
    samples: PositionSamples | None


def _erase_chunk(model: LoadedModel, study: StudyReadouts, chunk: np.ndarray, at: int,
                 folds: np.ndarray, fitted: list[LayerErasers], out: _Outputs,
                 every: bool) -> None:
    """Erase (and, as the control, project out a random subspace) at every layer of ``fitted``
    for the read-outs ``chunk`` (rows ``at..`` of the outputs)."""
    import torch

    sl = slice(at, at + chunk.size)
    fk = folds[sl]
    batch = RowBatch.of([study.queries[q] for q in chunk])
    run = clean_run(model, batch)
    out.clean[sl, : run.logprob.shape[1]] = run.logprob
    tiled = batch.tile(2)
    first = _row_query(batch)
    lengths = batch.lengths()
    leading = {int(q): r for r, q in reversed(list(enumerate(first)))}
    for li, f in enumerate(fitted):
        res = run.resid[f.layer]
        edited = []
        if every:
            assert f.index is not None
            full = res.double().cpu().numpy()
            for kind in (f.erasers, f.controls):
                new = full.copy()
                for r, n in enumerate(lengths):
                    role = f.index.ids(row_roles(batch.queries[first[r]], int(n)))
                    new[r, :n] = kind[int(fk[first[r]])].apply(full[r, :n], role)
                edited.append(torch.as_tensor(new, device=res.device, dtype=res.dtype))
                if out.samples is not None and kind is f.erasers:
                    for q, r in leading.items():
                        out.samples.add(li, at + q, batch.queries[q], full[r], new[r])
        else:
            ans = at_answer(res, batch).double().cpu().numpy()
            for kind in (f.erasers, f.controls):
                new = np.stack([kind[int(fk[first[r]])].apply(ans[r : r + 1])[0]
                                for r in range(ans.shape[0])])
                edited.append(with_answer(res, batch, torch.as_tensor(new, device=res.device)))
        lp = run_edited(model, tiled, f.layer, torch.cat(edited), run).reshape(2, chunk.size, -1)
        out.erased[sl, li, : lp.shape[-1]] = lp[0]
        out.control[sl, li, : lp.shape[-1]] = lp[1]
    del run


def erase_logprobs(
    model: LoadedModel,
    study: StudyReadouts,
    rows: np.ndarray,
    options: EraseOptions = EraseOptions(),
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> xr.Dataset:
    """Erase the concept at every layer of ``options`` for the study's read-outs ``rows``.

    The R² after erasure are those of the eraser applied: at the answer position, the
    cross-fitted answer erasers; ``at="all"``, a decoder at each checked position
    (:class:`PositionSamples`) on the residuals the every-position eraser left, held out
    over the same folds (``decoder_r2_erased`` at the answer position, ``decoder_r2_erased_max``
    over the checked positions)."""
    layers = layer_list(options.layers, model.info.n_layers)
    folds, fitted = fit_all(study, rows, layers, options)
    every = options.at == "all"
    samples = None
    if every:
        fitted = fit_every_position(model, study, rows, folds, fitted, options.batch_size,
                                    np.random.default_rng([options.seed, 1]))
        samples = PositionSamples.of(study, rows, len(layers), model.info.d_model)
    n_opt = max(len(study.queries[q].option_ids) for q in rows)
    erased = np.full((rows.size, len(layers), n_opt), np.nan)
    out = _Outputs(erased, np.full_like(erased, np.nan), np.full((rows.size, n_opt), np.nan),
                   samples)
    for start in range(0, rows.size, options.batch_size):
        chunk = rows[start : start + options.batch_size]
        _erase_chunk(model, study, chunk, start, folds, fitted, out, every)
        if on_progress is not None:
            on_progress(start + chunk.size, rows.size)
    ds = _erase_dataset(study, rows, layers, folds, fitted, out, options.at)
    if samples is not None:
        r2_clean, r2_erased = samples.r2(oracle_mean(study.table)[rows], folds)
        ds["decoder_r2_erased"] = (LAYER, r2_erased[:, 0])
        ds["decoder_r2_clean_max"] = (LAYER, _nanmax(r2_clean))
        ds["decoder_r2_erased_max"] = (LAYER, _nanmax(r2_erased))
        ds["decoder_r2_erased_max"].attrs["description"] = (
            "largest held-out R² of a ridge decoder of the concept at one checked position "
            "role, on the residuals the every-position eraser left (cross-fitted)")
        ds.attrs["decoder_r2_positions"] = (
            f"{len(samples.units)} position roles checked (the answer position first)")
    return ds


def _nanmax(x: np.ndarray) -> np.ndarray:
    """Max over the last axis ignoring NaN (NaN where all are)."""
    have = np.isfinite(x).any(axis=-1)
    return np.where(have, np.nanmax(np.where(np.isfinite(x), x, -np.inf), axis=-1), np.nan)


def _erase_dataset(study: StudyReadouts, rows: np.ndarray, layers: Sequence[int], folds: np.ndarray,
                   fitted: list[LayerErasers], out: _Outputs, at: str) -> xr.Dataset:
    """The result file's variables (module docstring)."""
    n_opt = out.clean.shape[1]
    prior_q = prior_rows(study, rows)
    study_lp = np.asarray(study.table["option_logprob"].values, dtype=np.float64)[:, :n_opt]
    prior = np.where(prior_q[:, None] >= 0, study_lp[np.maximum(prior_q, 0)], np.nan)
    ds = xr.Dataset(
        {
            "erased_logprob": ((QUERY, LAYER, OPTION), out.erased),
            "control_logprob": ((QUERY, LAYER, OPTION), out.control),
            "clean_logprob": ((QUERY, OPTION), out.clean),
            "prior_logprob": ((QUERY, OPTION), prior),
            "study_query": (QUERY, rows.astype(np.int32)),
            "fold": (QUERY, folds.astype(np.int32)),
            "eraser_rank": (LAYER, np.array([f.erasers[0].rank for f in fitted], np.int32)),
            **({"eraser_roles": (LAYER, np.array([f.erasers[0].roles for f in fitted],
                                                 np.int32))} if at == "all" else {}),
            "decoder_r2_clean": (LAYER, np.array([f.r2_clean for f in fitted])),
            "decoder_r2_erased": (LAYER, np.array([f.r2_erased for f in fitted])),
        },
        coords={LAYER: np.asarray(layers, dtype=np.int32)},
    )
    where = "the answer position" if at == "answer" else "every position"
    ds.attrs["at"] = at
    ds.attrs["eraser"] = ("LEACE (concept_erasure's LeaceFitter) at the answer position"
                          if at == "answer" else VARIANT)
    ds["erased_logprob"].attrs["description"] = (
        f"log P(option) with the oracle concept LEACE-erased at {where} of layer l "
        f"(eraser fitted at {where} of the other folds' episodes"
        + ("" if at == "answer" else ", one per position role") + ")")
    ds["control_logprob"].attrs["description"] = (
        "log P(option) with a random subspace of equal rank erased instead"
        + ("" if at == "answer" else " (a random direction per position role)"))
    ds["prior_logprob"].attrs["description"] = (
        "the study's log P(option) at turn 0 of the same episode, delivery, probe, rotation")
    ds["decoder_r2_erased"].attrs["description"] = (
        "held-out R² of a ridge decoder of the concept at the answer position after the "
        "eraser applied")
    return with_table(ds, study.select(rows), n_opt)


def _row_query(batch: RowBatch) -> np.ndarray:
    """The query of each row of ``batch``."""
    return np.array([r.query for r in batch.rows], dtype=np.int64)
