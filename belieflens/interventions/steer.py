"""Steering along decoder directions: add α·σ_l·w_l at the answer position of layer l
(``at="after-evidence"``: at every position after the evidence, through the read-out's end).

**After the evidence.** A read-out's evidence ends at the last context position where the
study's read-outs of the same turn, delivery, probe and rotation, of the same length, differ
across episodes (what differs between episodes is the evidence: for coin flip, the flips);
every position after it (the question, the answer position, and a multi-token option's
tokens) is steered. A read-out with no such comparison (one episode, or no other of its
length) is refused in one line (:func:`evidence_end`).

``w_l`` is the unit direction of the oracle's point estimate in the study's own residuals at
layer ``l``: the ridge decoder's (``direction=ridge``,
:func:`belieflens.interventions.directions.decoder_direction`) or the difference of means
between read-outs above and below the concept's median (``direction=diff-means``,
:func:`~belieflens.interventions.directions.diff_means_direction`); ``σ_l`` the standard
deviation of those residuals along ``w_l``, so ``α`` is in units of the residuals' own spread
along the direction. **Cross-fitted by episode**, as erasure is: the selected read-outs are
split into ``n_folds`` folds grouped by episode (seeded), and a read-out is steered along the
direction (and σ) fitted on the other folds' read-outs, never on its own. The control adds
``α·σ·r_l`` along a random unit direction ``r_l`` (seeded), the same norm. Only blocks
``l..L-1`` run on the steered residual, and only from the first steered position on (the
clean run's keys and values serve the positions before it:
:func:`belieflens.interventions.forward.run_edited`), every α and the control of a layer
together.

Variables: ``steered_logprob`` and ``control_logprob[query, layer, alpha, option]``, the clean
``clean_logprob[query, option]``, ``study_query[query]``, ``query_fold[query]``, the directions
applied ``fold_direction[layer, fold, d_model]``, their ``fold_resid_std[layer, fold]`` and
``fold_gain[layer, fold]`` (how far the fold's decoder reads the concept move per unit α: the
oracle's move that steering asks for, NaN for directions that decode no concept);
per layer the direction fitted on all the selected read-outs, for reference (``direction``,
``resid_std``, ``decoder_r2``: its held-out R² under grouped cross-validation,
``decoder_lam``),
``control_direction[layer, d_model]``; and the read-outs' coordinates, outcomes and oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, get_args

import numpy as np
import xarray as xr

from belieflens.dims import ALPHA, D_MODEL, FOLD, LAYER, OPTION, QUERY
from belieflens.errors import ParameterError, at_least, choice
from belieflens.interventions.belief import steer_reads, study_beliefs
from belieflens.interventions.directions import (
    Direction,
    belief_direction,
    decoder_direction,
    diff_means_direction,
    episode_folds,
    random_unit,
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
from belieflens.interventions.steer_report import STEER
from belieflens.model.load import LoadedModel

SteerAt = Literal["answer", "after-evidence"]
"""Positions the steering vector is added at."""

STEER_AT: tuple[SteerAt, ...] = get_args(SteerAt)

DirectionKind = Literal["ridge", "diff-means", "belief", "belief-decoder"]
"""How a steering direction is fitted."""

DIRECTIONS: tuple[DirectionKind, ...] = get_args(DirectionKind)

DEFAULT_ALPHAS: tuple[float, ...] = (-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0)
"""Steering strengths, in standard deviations of the residuals along the direction."""


@dataclass(frozen=True)
class SteerOptions:
    """How to steer: layers, strengths, folds of the decoder, batch size, seed, positions.

    Passed to :func:`belieflens.steer`; the result file holds
    ``steered_logprob`` and ``control_logprob[query, layer, alpha, option]``. Directions are
    cross-fitted over ``n_folds`` folds grouped by episode (a read-out is steered along a
    direction fitted without its episode): ``n_folds`` needs as many episodes in the study.
    ``direction`` is ``ridge`` (the ridge decoder's weights), ``diff-means``, or, on a
    token-level study, ``belief`` / ``belief-decoder``: the direction raising the regressed
    belief in hidden state ``state`` (its pattern in the residuals, or the regression's
    least-norm shift; :func:`~belieflens.interventions.directions.belief_direction`).

    Examples:
        >>> options = belieflens.SteerOptions(layers=(15,), alphas=(-2.0, 0.0, 2.0), n_folds=2)
        >>> options.alphas, options.at, options.direction
        ((-2.0, 0.0, 2.0), 'answer', 'ridge')
    """

    kind: ClassVar[str] = STEER.name
    need: ClassVar[tuple[str, ...]] = ("resid",)

    layers: tuple[int, ...] | None = None
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    n_folds: int = 5
    lam: float | None = None
    batch_size: int = 8
    seed: int = 0
    at: SteerAt = "answer"
    direction: DirectionKind = "ridge"
    state: int = 0
    """The hidden state whose belief ``direction="belief"`` raises."""

    def __post_init__(self) -> None:
        at_least("--batch-size", self.batch_size, 1)
        choice("--at", self.at, STEER_AT)
        choice("--direction", self.direction, DIRECTIONS)
        if not self.alphas:
            raise ParameterError("option '--alphas' is empty")
        at_least("--folds", self.n_folds, 2)
        at_least("--state", self.state, 0)

    def plan(self, study: StudyReadouts, select: Selection) -> Plan:
        """Steer the selected read-outs (:func:`steer_logprobs`)."""
        rows = select.rows(study)
        if self.direction.startswith("belief"):  # one line now, before the model loads
            n_state = study_beliefs(study).shape[1]
            if self.state >= n_state:
                raise ParameterError(f"--state = {self.state} is not allowed: the study's "
                                     f"process has hidden states 0..{n_state - 1}")
        return Plan({**asdict(self), **asdict(select)}, lambda model, progress: steer_logprobs(
            model, study, rows, self, on_progress=progress), steer_reads)


def fit_directions(study: StudyReadouts, rows: np.ndarray, layers: Sequence[int],
                   rng: np.random.Generator, *, n_folds: int = 5, lam: float | None = None,
                   kind: DirectionKind = "ridge", state: int = 0) -> list[Direction]:
    """The direction of each layer, fitted on the rows ``rows`` that have an oracle."""
    target = oracle_mean(study.table)[rows]
    ok = np.isfinite(target)
    if ok.sum() < 3:
        raise ParameterError("fewer than 3 selected read-outs have an oracle: nothing to fit "
                             "a decoder direction on")
    fit_rows = rows[ok]
    groups = np.asarray(study.table["episode"].values)[fit_rows]
    out = []
    for layer in layers:
        x = study_resid(study, [layer], list(fit_rows))[:, 0, :]
        if kind in ("belief", "belief-decoder"):
            out.append(belief_direction(x, study_beliefs(study)[fit_rows], state, groups, rng,
                                        n_folds=n_folds, decoder=kind == "belief-decoder"))
            continue
        out.append(diff_means_direction(x, target[ok]) if kind == "diff-means" else
                   decoder_direction(x, target[ok], groups, rng, n_folds=n_folds,
                                     lam=lam))
    return out


@dataclass(frozen=True, eq=False)
class CrossFit:
    """Cross-fitted directions: ``by_fold[l][k]`` was fitted without fold ``k``'s episodes;
    ``full[l]`` on every selected read-out (reported, never applied)."""

    folds: np.ndarray
    """Fold of each selected read-out."""
    by_fold: list[list[Direction]]
    full: list[Direction]


def cross_fit(study: StudyReadouts, rows: np.ndarray, layers: Sequence[int], options: SteerOptions,
              rng: np.random.Generator) -> CrossFit:
    """The fold of each row (grouped by episode) and each layer's direction per fold, fitted
    on the other folds' rows; one line when the rows span a single episode."""
    groups = np.asarray(study.table["episode"].values)[rows]
    folds, k = episode_folds(groups, options.n_folds, rng)
    if k < 2:
        raise ParameterError("steering cross-fits its direction by episode: the selected "
                             "read-outs need at least 2 episodes")
    full = fit_directions(study, rows, layers, rng, n_folds=options.n_folds, lam=options.lam,
                          kind=options.direction, state=options.state)
    target = oracle_mean(study.table)[rows]
    by_fold: list[list[Direction]] = [[] for _ in layers]
    for f in range(k):
        train = rows[folds != f]
        if np.unique(target[folds != f][np.isfinite(target[folds != f])]).size < 2:
            raise ParameterError(
                f"steering cross-fits its direction by episode: without fold {f} the selected "
                "read-outs hold fewer than 2 distinct oracle values, nothing to fit a direction "
                "on (select more turns or episodes, or fewer --folds)")
        for li, d in enumerate(fit_directions(study, train, layers, rng,
                                              n_folds=options.n_folds, lam=options.lam,
                                              kind=options.direction, state=options.state)):
            by_fold[li].append(d)
    return CrossFit(folds, by_fold, full)


def evidence_end(study: StudyReadouts, rows: np.ndarray) -> np.ndarray:
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


def _shifts(res: Any, batch: RowBatch, mask: np.ndarray | None, vecs: list[Any],
            alphas: np.ndarray) -> Any:
    """The residual ``res`` shifted by ``α·vec`` for each vector of ``vecs`` (``[row, d]``, one
    per row: its fold's) and each α, at the answer position or under ``mask``."""
    import torch

    out: list[Any] = []
    ans = at_answer(res, batch)
    for vec in vecs:
        if mask is None:
            out.extend(with_answer(res, batch, ans + float(a) * vec) for a in alphas)
        else:
            m = torch.as_tensor(mask, device=res.device, dtype=res.dtype)[:, :, None]
            out.extend(res + float(a) * m * vec[:, None, :] for a in alphas)
    return torch.cat(out)


def _row_vectors(fit: CrossFit, li: int, folds: np.ndarray, control: np.ndarray,
                 like: Any) -> list[Any]:
    """Per row of a batch (its ``folds``): σ·w of its fold's direction, and σ·r of the
    control, as tensors like ``like``."""
    import torch

    dirs = [fit.by_fold[li][int(f)] for f in folds]
    steer = np.stack([d.unit * d.scale for d in dirs])
    ctrl = np.stack([control * d.scale for d in dirs])
    return [torch.as_tensor(v, device=like.device, dtype=like.dtype) for v in (steer, ctrl)]


def steer_logprobs(
    model: LoadedModel,
    study: StudyReadouts,
    rows: np.ndarray,
    options: SteerOptions = SteerOptions(),
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> xr.Dataset:
    """Steer the study's read-outs ``rows`` at every layer and α of ``options``, each along
    the direction fitted without its episode (:func:`cross_fit`)."""
    layers = layer_list(options.layers, model.info.n_layers)
    rng = np.random.default_rng(options.seed)
    fit = cross_fit(study, rows, layers, options, rng)
    controls = [random_unit(model.info.d_model, rng) for _ in layers]
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
        run = clean_run(model, batch, layers=layers)
        clean[sl, : run.logprob.shape[1]] = run.logprob
        tiled = batch.tile(2 * n_a)
        mask = None if ends is None else _after_mask(batch, ends[sl], batch.width)
        for li, layer in enumerate(layers):
            res = run.resid[layer]
            vecs = _row_vectors(fit, li, fit.folds[sl], controls[li], res)
            lp = run_edited(model, tiled, layer, _shifts(res, batch, mask, vecs, alphas), run)
            lp = lp.reshape(2, n_a, chunk.size, -1).transpose(0, 2, 1, 3)
            steered[sl, li, :, : lp.shape[-1]] = lp[0]
            control[sl, li, :, : lp.shape[-1]] = lp[1]
        del run
        if on_progress is not None:
            on_progress(start + chunk.size, rows.size)
    ds = _steer_dataset(fit, layers, alphas, controls, rows, steered, control, clean)
    where = ("the answer position" if options.at == "answer"
             else "every position after the evidence")
    ds.attrs["at"] = options.at
    ds.attrs["direction_kind"] = options.direction
    ds["steered_logprob"].attrs["description"] = (
        f"log P(option) with alpha * fold_resid_std * fold_direction (fitted without the "
        f"read-out's episode) added at {where}")
    ds["control_logprob"].attrs["description"] = (
        "log P(option) with alpha * fold_resid_std * control_direction (random) added instead")
    return with_table(ds, study.select(rows), n_opt)


def _steer_dataset(fit: CrossFit, layers: Sequence[int], alphas: np.ndarray,
                   controls: list[np.ndarray], rows: np.ndarray, steered: np.ndarray,
                   control: np.ndarray, clean: np.ndarray) -> xr.Dataset:
    """The result variables of :func:`steer_logprobs` (module docstring)."""
    full = fit.full
    return xr.Dataset(
        {
            "steered_logprob": ((QUERY, LAYER, ALPHA, OPTION), steered),
            "control_logprob": ((QUERY, LAYER, ALPHA, OPTION), control),
            "clean_logprob": ((QUERY, OPTION), clean),
            "study_query": (QUERY, rows.astype(np.int32)),
            "query_fold": (QUERY, fit.folds.astype(np.int32)),
            "fold_direction": ((LAYER, FOLD, D_MODEL),
                               np.stack([np.stack([d.unit for d in by]) for by in fit.by_fold])),
            "fold_resid_std": ((LAYER, FOLD),
                               np.array([[d.scale for d in by] for by in fit.by_fold])),
            "fold_gain": ((LAYER, FOLD),
                          np.array([[d.scale * d.gain for d in by] for by in fit.by_fold])),
            "direction": ((LAYER, D_MODEL), np.stack([x.unit for x in full])),
            "control_direction": ((LAYER, D_MODEL), np.stack(controls)),
            "resid_std": (LAYER, np.array([x.scale for x in full])),
            "decoder_r2": (LAYER, np.array([x.r2 for x in full])),
            "decoder_lam": (LAYER, np.array([x.lam for x in full])),
        },
        coords={LAYER: np.asarray(layers, dtype=np.int32), ALPHA: alphas},
    )
