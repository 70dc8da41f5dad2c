"""Steering along probe directions: add α·σ_l·w_l at the answer position of layer l
(``at="after-evidence"``: at every position after the evidence, through the read-out's end).

**After the evidence.** A read-out's evidence ends at the last context position where the
study's read-outs of the same turn, delivery, probe and rotation, of the same length, differ
across episodes (what differs between episodes is the evidence: for coin flip, the flips);
every position after it (the question, the answer position, and a multi-token option's
tokens) is steered. A read-out with no such comparison (one episode, or no other of its
length) is refused in one line (:func:`evidence_end`).

``w_l`` is the unit direction of the ridge probe of the oracle's point estimate fitted on the
study's own residuals at layer ``l`` (:func:`belieflens.interventions.directions.probe_direction`),
``σ_l`` the standard deviation of those residuals along ``w_l``, so ``α`` is in units of the
residuals' own spread along the direction. The control adds ``α·σ_l·r_l`` along a random unit
direction ``r_l`` (seeded), the same norm. Only blocks ``l..L-1`` run on the steered residual,
every α and the control of a layer in one batch.

Variables: ``steered_logprob`` and ``control_logprob[query, layer, alpha, option]``, the clean
``clean_logprob[query, option]``, ``study_query[query]``, per layer ``direction`` and
``control_direction[layer, d_model]``, ``resid_std``, ``probe_r2``, ``probe_lam``, and the
read-outs' coordinates, outcomes and oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, get_args

import numpy as np
import xarray as xr

from belieflens.dims import ALPHA, D_MODEL, LAYER, OPTION, QUERY
from belieflens.errors import ParameterError, at_least, choice
from belieflens.interventions.directions import Direction, probe_direction, random_unit
from belieflens.interventions.forward import RowBatch, at_answer, clean_run, run_from, with_answer
from belieflens.interventions.model import layer_list
from belieflens.interventions.run import Plan
from belieflens.interventions.study import (
    Selection,
    Study,
    oracle_mean,
    study_resid,
    with_table,
)
from belieflens.model.load import LoadedModel
from belieflens.store.results import Kind

SteerAt = Literal["answer", "after-evidence"]
"""Positions the steering vector is added at."""

STEER_AT: tuple[SteerAt, ...] = get_args(SteerAt)

DEFAULT_ALPHAS: tuple[float, ...] = (-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0)
"""Steering strengths, in standard deviations of the residuals along the direction."""


@dataclass(frozen=True)
class SteerOptions:
    """How to steer: layers, strengths, folds of the probe, batch size, seed, positions.

    Passed to :func:`belieflens.steer`; the result file holds
    ``steered_logprob`` and ``control_logprob[query, layer, alpha, option]``. The ridge
    probe's folds are grouped by episode: ``n_folds`` needs as many episodes in the study.

    Examples:
        >>> options = belieflens.SteerOptions(layers=(15,), alphas=(-2.0, 0.0, 2.0), n_folds=2)
        >>> options.alphas, options.at
        ((-2.0, 0.0, 2.0), 'answer')
    """

    kind: ClassVar[Kind] = "intervention-steer"
    need: ClassVar[tuple[str, ...]] = ("resid",)

    layers: tuple[int, ...] | None = None
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    n_folds: int = 5
    lam: float | None = None
    batch_size: int = 8
    seed: int = 0
    at: SteerAt = "answer"

    def __post_init__(self) -> None:
        at_least("--batch-size", self.batch_size, 1)
        choice("--at", self.at, STEER_AT)
        if not self.alphas:
            raise ParameterError("option '--alphas' is empty")
        at_least("--folds", self.n_folds, 2)

    def plan(self, study: Study, select: Selection) -> Plan:
        """Steer the selected read-outs (:func:`steer_logprobs`)."""
        rows = select.rows(study)
        return Plan({**asdict(self), **asdict(select)}, lambda model, progress: steer_logprobs(
            model, study, rows, self, on_progress=progress))


def fit_directions(study: Study, rows: np.ndarray, layers: Sequence[int],
                   rng: np.random.Generator, *, n_folds: int = 5, lam: float | None = None,
                   ) -> list[Direction]:
    """The probe direction of each layer, fitted on the selected rows with an oracle."""
    target = oracle_mean(study.table)[rows]
    ok = np.isfinite(target)
    if ok.sum() < 3:
        raise ParameterError("fewer than 3 selected read-outs have an oracle: nothing to fit "
                             "a probe direction on")
    fit_rows = rows[ok]
    groups = np.asarray(study.table["episode"].values)[fit_rows]
    out = []
    for layer in layers:
        x = study_resid(study, [layer], list(fit_rows))[:, 0, :]
        out.append(probe_direction(x, target[ok], groups, rng, n_folds=n_folds, lam=lam))
    return out


def evidence_end(study: Study, rows: np.ndarray) -> np.ndarray:
    """For each selected read-out, the last context position of its evidence: the last
    position where read-outs of the same turn, delivery, probe, rotation and length differ
    across episodes (module docstring). One line if a read-out has nothing to compare with."""
    t = study.table
    key_cols = [np.asarray(t[name].values).astype(str)
                for name in ("turn", "delivery", "probe", "rotation")]
    episode = np.asarray(t["episode"].values)
    groups: dict[tuple[str, ...], list[int]] = {}
    for q in range(study.n_query):
        key = (*(c[q] for c in key_cols), str(len(study.queries[q].context_ids)))
        groups.setdefault(key, []).append(q)
    ends = np.empty(rows.size, dtype=np.int64)
    for i, q in enumerate(rows):
        key = (*(c[q] for c in key_cols), str(len(study.queries[q].context_ids)))
        peers = [p for p in groups[key] if episode[p] != episode[q]]
        ids = np.asarray(study.queries[q].context_ids)
        diff = np.zeros(ids.size, dtype=bool)
        for p in peers:
            diff |= ids != np.asarray(study.queries[p].context_ids)
        if not diff.any():
            raise ParameterError(
                f"--at after-evidence: read-out {q} (episode {episode[q]}, turn {key[0]}) has no "
                "read-out of another episode with the same turn, probe, rotation and length "
                "that differs from it: its evidence cannot be located")
        ends[i] = int(np.flatnonzero(diff)[-1])
    return ends


def _after_mask(batch: RowBatch, ends: np.ndarray, width: int) -> np.ndarray:
    """``[row, position]`` 1.0 at every real position after the query's evidence end."""
    mask = np.zeros((len(batch.rows), width))
    for b, r in enumerate(batch.rows):
        mask[b, int(ends[r.query]) + 1 : len(r.ids)] = 1.0
    return mask


def steer_logprobs(
    model: LoadedModel,
    study: Study,
    rows: np.ndarray,
    options: SteerOptions = SteerOptions(),
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> xr.Dataset:
    """Steer the study's read-outs ``rows`` at every layer and α of ``options``."""
    import torch

    layers = layer_list(options.layers, model.info.n_layers)
    rng = np.random.default_rng(options.seed)
    dirs = fit_directions(study, rows, layers, rng, n_folds=options.n_folds, lam=options.lam)
    d = model.info.d_model
    controls = [random_unit(d, rng) for _ in layers]
    alphas = np.asarray(options.alphas, dtype=np.float64)
    n_a = alphas.size
    n_opt = max(len(study.queries[q].option_ids) for q in rows)
    ends = evidence_end(study, rows) if options.at == "after-evidence" else None
    steered = np.full((rows.size, len(layers), n_a, n_opt), np.nan)
    control = np.full_like(steered, np.nan)
    clean = np.full((rows.size, n_opt), np.nan)
    for start in range(0, rows.size, options.batch_size):
        chunk = rows[start : start + options.batch_size]
        sl = slice(start, start + chunk.size)
        batch = RowBatch.of([study.queries[q] for q in chunk])
        run = clean_run(model, batch)
        clean[sl, : run.logprob.shape[1]] = run.logprob
        tiled = batch.tile(2 * n_a)
        mask = None if ends is None else _after_mask(batch, ends[sl], run.resid.shape[2])
        for li, layer in enumerate(layers):
            res = run.resid[layer]
            ans = at_answer(res, batch)
            dev, dt = res.device, res.dtype
            shifts: list[Any] = []
            for unit in (dirs[li].unit, controls[li]):
                vec = torch.as_tensor(unit * dirs[li].scale, device=dev, dtype=dt)
                if mask is None:
                    shifts.extend(with_answer(res, batch, ans + float(a) * vec) for a in alphas)
                else:
                    m = torch.as_tensor(mask, device=dev, dtype=dt)[:, :, None]
                    shifts.extend(res + float(a) * m * vec for a in alphas)
            lp = run_from(model, tiled, layer, torch.cat(shifts))
            lp = lp.reshape(2, n_a, chunk.size, -1).transpose(0, 2, 1, 3)
            steered[sl, li, :, : lp.shape[-1]] = lp[0]
            control[sl, li, :, : lp.shape[-1]] = lp[1]
        del run
        if on_progress is not None:
            on_progress(start + chunk.size, rows.size)
    ds = xr.Dataset(
        {
            "steered_logprob": ((QUERY, LAYER, ALPHA, OPTION), steered),
            "control_logprob": ((QUERY, LAYER, ALPHA, OPTION), control),
            "clean_logprob": ((QUERY, OPTION), clean),
            "study_query": (QUERY, rows.astype(np.int32)),
            "direction": ((LAYER, D_MODEL), np.stack([x.unit for x in dirs])),
            "control_direction": ((LAYER, D_MODEL), np.stack(controls)),
            "resid_std": (LAYER, np.array([x.scale for x in dirs])),
            "probe_r2": (LAYER, np.array([x.r2 for x in dirs])),
            "probe_lam": (LAYER, np.array([x.lam for x in dirs])),
        },
        coords={LAYER: np.asarray(layers, dtype=np.int32), ALPHA: alphas},
    )
    where = ("the answer position" if options.at == "answer"
             else "every position after the evidence")
    ds.attrs["at"] = options.at
    ds["steered_logprob"].attrs["description"] = (
        f"log P(option) with alpha * resid_std * direction added at {where}")
    ds["control_logprob"].attrs["description"] = (
        "log P(option) with alpha * resid_std * control_direction (random) added instead")
    return with_table(ds, study.select(rows), n_opt)
