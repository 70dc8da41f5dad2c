"""Own-answer decoders: where in the network the model's own answer forms.

A decoder of the oracle asks whether a layer holds the Bayesian answer; a network may hold it
(an untrained one holds the counts it is a function of) and answer something else. The
own-answer decoder reads the model's **own** final belief instead: its debiased output
(:func:`~belieflens.analysis.beliefs.output_beliefs`, the rotations pooled) for each probe
instance, decoded from the residual at the answer position of each of its read-outs, one
layer at a time. The layer where it becomes decodable is where the output forms.

The fit is the one estimator's (:func:`~belieflens.analysis.decoders.estimator.ridge_heldout`:
nested-CV ridge, λ chosen inside each outer fold's training episodes) on analyze's decoder
tasks and folds (:func:`~belieflens.analysis.summary.decoder_tasks` from the same seed: one
fit per probe question), scored by held-out R² pooled over the answer's outcomes (whole
episodes held out). Beside it:

- the **statistic baselines** fitted to the same own-answer target on the same folds: how
  much of the answer a statistic of the evidence (the counts, the turn, the last flips)
  already explains;
- with untrained controls (:func:`own_answer_floor`), the **floor**: the same target (this
  model's own answer) decoded from each untrained network's residuals at the same read-outs,
  so a layer that holds the answer only as far as random features of the prompt do is not
  where it forms. Intervals as every floor's: over episodes and seeds, corrected across
  layers (:func:`~belieflens.analysis.floor.compare_readouts`).

Examples:
    Not run here (a fit takes 3 episodes or more):

    >>> ds.bl.own_answer()["r2"].dims                       # doctest: +SKIP
    ('probe', 'layer')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.baselines import Statistics, check_statistics
from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.decoders.estimator import episode_sums, ridge_heldout, ridge_heldout_many
from belieflens.analysis.decoders.softmax import FIT_BLAS_LIMIT
from belieflens.analysis.floor import (
    BOOTSTRAP,
    Readout,
    check_floor,
    compare_readouts,
    control_names,
)
from belieflens.analysis.summary import DECODER_FOLDS, decoder_tasks
from belieflens.analysis.transfer import layer_groups, read_rows
from belieflens.dims import BASELINE, DELIVERY, EPISODE, LAYER, OUTCOME, PROBE, QUERY, TURN
from belieflens.errors import ParameterError
from belieflens.types import DebiasMethod

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

SOURCE_PREFIX = "own answer: "
"""A source of :func:`own_answer_floor` is this and the probe question's name."""


@dataclass(frozen=True)
class OwnTask:
    """One probe question's own-answer fit: its read-outs (with an output belief), the
    model's own belief at each ``[row, outcome]`` and the folds of analyze's decoders."""

    probe: str
    rows: I64
    y: F64
    folds: I64


def own_targets(ds: xr.Dataset, rng: np.random.Generator, *,
                method: DebiasMethod = "geometric",
                n_folds: int = DECODER_FOLDS) -> list[OwnTask]:
    """Each probe question's :class:`OwnTask`: the rows and folds of analyze's decoder task
    (:func:`~belieflens.analysis.summary.decoder_tasks` from ``rng``) whose instance has an
    output belief, and that belief (its first ``K`` outcomes) at each row."""
    belief = output_beliefs(ds, method=method)["belief"]
    at = {d: xr.DataArray(np.asarray(ds[d].values), dims=QUERY)
          for d in (DELIVERY, PROBE, EPISODE, TURN)}
    per_row = np.asarray(belief.sel(at).transpose(QUERY, OUTCOME).values, dtype=np.float64)
    probe = np.asarray(ds[PROBE].values).astype(str)
    out = []
    for rows, y, folds in decoder_tasks(ds, rng, n_folds=n_folds):
        own = per_row[rows][:, : y.shape[1]]
        ok = np.all(np.isfinite(own), axis=1)
        if np.unique(folds[ok]).size >= 3:
            out.append(OwnTask(str(probe[rows[0]]), rows[ok], own[ok], folds[ok]))
    return out


def _fits(x_of: xr.Dataset, tasks: Sequence[OwnTask]) -> list[list[F64]]:
    """Held-out predictions of each task's target at each layer of ``x_of``'s residuals
    (``[task][layer]``, each ``[row, outcome]``), the layers read in groups
    (:func:`~belieflens.analysis.transfer.layer_groups`)."""
    used = np.unique(np.concatenate([t.rows for t in tasks]))
    at = [np.searchsorted(used, t.rows) for t in tasks]
    row_bytes = used.size * x_of.sizes["d_model"] * np.dtype(x_of["resid"].dtype).itemsize
    preds: list[list[F64]] = [[] for _ in tasks]
    with FIT_BLAS_LIMIT:
        for group in layer_groups(x_of.sizes[LAYER], row_bytes):
            x = read_rows(x_of, used, group)
            for i in range(len(group)):
                xl = np.asarray(x[:, i], dtype=np.float64)
                for j, t in enumerate(tasks):
                    preds[j].append(ridge_heldout_many(xl[at[j]], [(t.y, [])], t.folds)[0].pred)
    return preds


def _baselines(statistics: Statistics, t: OwnTask) -> dict[str, F64]:
    """Each statistic baseline's held-out predictions of the task's own answer."""
    with FIT_BLAS_LIMIT:
        return {name: ridge_heldout(np.asarray(v, dtype=np.float64)[t.rows], t.y,
                                    t.folds).pred for name, v in statistics.items()}


def _readouts(ds: xr.Dataset, tasks: Sequence[OwnTask], preds: Sequence[Sequence[F64]],
              statistics: Statistics) -> list[Readout]:
    """The fits as the floor's R² read-outs, one source per question (with its baselines
    where ``statistics`` are given)."""
    episodes = np.asarray(ds[EPISODE].values)
    order = np.unique(episodes)
    out = []
    for t, per_layer in zip(tasks, preds, strict=True):
        ep = episodes[t.rows]
        base = tuple(Readout(n, "r2", layers=(episode_sums(t.y, p, ep, order),))
                     for n, p in _baselines(statistics, t).items()) if statistics else ()
        out.append(Readout(SOURCE_PREFIX + t.probe, "r2",
                           layers=tuple(episode_sums(t.y, p, ep, order) for p in per_layer),
                           baselines=base))
    return out


def own_answer_values(ds: xr.Dataset, *, seed: int = 0, method: DebiasMethod = "geometric",
                      statistics: Statistics | None = None,
                      n_folds: int = DECODER_FOLDS) -> xr.Dataset:
    """The own-answer decoders of a file: ``r2 (probe, layer)``, the held-out R² of the
    model's own debiased answer from each layer's residual, and ``baseline_r2 (probe,
    baseline)``, each statistic baseline's fitted to the same target on the same folds.
    Folds from ``np.random.default_rng(seed)``: analyze's decoders'."""
    statistics = dict(statistics or {})
    check_statistics(ds, statistics)
    tasks = _tasks(ds, seed, method, n_folds)
    reads = _readouts(ds, tasks, _fits(ds, tasks), statistics)
    one = np.ones(reads[0].layers[0].n.size)
    r2 = np.stack([r.values(one) for r in reads])
    base = np.array([[b.values(one)[0] for b in r.baselines] for r in reads]).reshape(
        len(reads), len(statistics))
    probes = [t.probe for t in tasks]
    out = xr.Dataset({"r2": (("probe", LAYER), r2),
                      "baseline_r2": (("probe", BASELINE), base)},
                     coords={"probe": probes, LAYER: np.arange(r2.shape[1]),
                             BASELINE: list(statistics)})
    out["r2"].attrs["description"] = ("held-out R2 of the model's own debiased answer from "
                                      "the layer's residual at the answer position")
    out.attrs.update({"seed": seed, "n_folds": n_folds, "debias": method,
                      "target": "the model's own debiased output belief"})
    return out


def _tasks(ds: xr.Dataset, seed: int, method: DebiasMethod, n_folds: int) -> list[OwnTask]:
    tasks = own_targets(ds, np.random.default_rng(seed), method=method, n_folds=n_folds)
    if not tasks:
        raise ParameterError("no own answer to decode: a question needs an output belief in "
                             "3 episodes or more")
    return tasks


def _same_readouts(ds: xr.Dataset, control: xr.Dataset, name: str) -> None:
    """One line unless ``control`` holds the study's read-outs in the study's order."""
    for key in (DELIVERY, PROBE, EPISODE, TURN, "rotation"):
        if not np.array_equal(np.asarray(ds[key].values), np.asarray(control[key].values)):
            raise ParameterError(f"--floor {name} does not hold the study's read-outs in its "
                                 f"order (its {key} differs)")


def own_answer_floor(ds: xr.Dataset, controls: Sequence[tuple[str, xr.Dataset]], *,
                     seed: int = 0, method: DebiasMethod = "geometric",
                     statistics: Statistics | None = None, n_folds: int = DECODER_FOLDS,
                     n_boot: int = BOOTSTRAP) -> xr.Dataset:
    """The own-answer decoders beside their floor: the floor Dataset
    (:func:`~belieflens.analysis.floor.compare_readouts`; sources ``own answer: PROBE``,
    metric R²) of the study's own answer decoded from its residuals, against the same target
    decoded from each untrained control's residuals at the same read-outs (``controls``:
    ``(name, Dataset)`` of the same study, two or more) and against each statistic baseline
    fitted to it."""
    statistics = dict(statistics or {})
    check_statistics(ds, statistics)
    for name, c in controls:
        check_floor(ds.attrs, c.attrs, name)
        _same_readouts(ds, c, name)
    tasks = _tasks(ds, seed, method, n_folds)
    mine = _readouts(ds, tasks, _fits(ds, tasks), statistics)
    theirs = [_readouts(ds, tasks, _fits(c, tasks), {}) for _, c in controls]
    out = compare_readouts(mine, theirs, n_layers=ds.sizes[LAYER],
                           control_labels=control_names([c.attrs for _, c in controls]),
                           n_boot=n_boot, seed=seed)
    out.attrs.update({"what": "own answer", "target": "the model's own debiased output "
                      "belief; the controls' residuals decode the same target"})
    return out
