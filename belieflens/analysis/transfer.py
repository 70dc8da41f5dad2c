"""Transfer decoders: a layer's decoder fitted on one condition, scored on another.

A decoder of the oracle that a network passes by holding a bag of the evidence's tokens
(the "heads" and "tails" embeddings averaged by near-uniform attention) reads those tokens,
not a belief. Fitted on one condition and scored on another that shows the same evidence in
other tokens, such a decoder fails, while one that reads a belief bound to the evidence's
meaning carries over. The conditions are a :class:`Condition` each: a cache file and the
delivery of its rows, e.g.

- one file, ``multi-turn`` rows → ``single-turn`` rows (the same episodes told otherwise);
- two files of one study's seed differing in a parameter: a template and its paraphrase, the
  faces "heads"/"tails" and random names for them (the same flips), 10 flips and 20.

The decoder is analyze's (:func:`~belieflens.analysis.summary.decoder_tasks`: one per
probe question, the one estimator's nested-CV ridge fit of the oracle on the training
condition's rows, the folds of whole episodes that analyze draws from the same seed). Each
row of the test condition is predicted by the outer fold's fit that never saw its episode
(:func:`~belieflens.analysis.decoders.heldout.transfer_ridge`; an episode the training
condition lacks takes any fold), projected onto the simplex and scored by its TVD to the test
condition's oracle. Beside it, two references:

- ``within``: the same decoder fitted on the test condition itself, on the same folds: how
  well that condition reads at all, so that ``transfer`` − ``within`` is what the transfer
  costs;
- the **statistic baselines** (:mod:`belieflens.analysis.baselines`) transferred the same
  way, each fitted on the training condition's features and scored on the test condition's,
  where both conditions declare the feature set with the same width (the counts carry over
  from 10 flips to 20; a one-hot of the turn does not).

:func:`transfer_values` gives the TVDs per probe instance; :func:`transfer_floor` sets them
beside their **floor**: the same transfer between untrained networks' files of the two
conditions (pairs of one network each, ``extract --init random:SEED`` on both), with the
floors' intervals over episodes and control seeds, corrected across layers
(:func:`~belieflens.analysis.floor.compare_readouts`).

Examples:
    Not run here (a transfer needs 3 episodes or more; the controls come from ``extract
    ... --init random:SEED`` of both conditions):

    >>> ds.bl.transfer(deliveries=("multi-turn", "single-turn"))["transfer"].dims
    ... # doctest: +SKIP
    ('delivery', 'probe', 'episode', 'turn', 'layer')
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.baselines import Statistics, check_statistics
from belieflens.analysis.beliefs import query_n_outcome
from belieflens.analysis.decoders.heldout import heldout_distribution, simplex, transfer_ridge
from belieflens.analysis.decoders.softmax import FIT_BLAS_LIMIT
from belieflens.analysis.divergence import tvd_values
from belieflens.analysis.floor import (
    BOOTSTRAP,
    Readout,
    check_floor,
    compare_readouts,
    control_names,
    episode_totals,
)
from belieflens.analysis.summary import DECODER_FOLDS, DECODER_KIND, decoder_tasks, rotation_mean
from belieflens.dims import BASELINE, DELIVERY, EPISODE, LAYER, PROBE, QUERY
from belieflens.errors import ParameterError

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

TRANSFER = "transfer"
"""The source of the decoder fitted on the training condition, scored on the test condition."""
WITHIN = "within"
"""The source of the decoder fitted and scored on the test condition (on the same folds)."""

READ_BYTES = 2**27
"""Residual bytes (stored dtype, the rows a transfer uses, both files) read at a time: the
layers are fitted in groups that hold at most this."""


@dataclass(frozen=True, eq=False)
class Condition:
    """One side of a transfer: a cache file, the delivery of its rows it stands for
    (``None``: every delivery) and its statistic baselines' features
    (``belieflens.envs.statistic_features(ds)``; none: no baselines)."""

    ds: xr.Dataset
    delivery: str | None = None
    statistics: Statistics = field(default_factory=dict)

    def rows(self) -> NDArray[np.bool_]:
        """Which read-outs of the file belong to the condition ``[query]``."""
        if self.delivery is None:
            return np.ones(self.ds.sizes[QUERY], dtype=bool)
        return np.asarray(np.asarray(self.ds[DELIVERY].values).astype(str) == self.delivery)

    def check(self, role: str) -> None:
        """One line (:class:`ParameterError`) where the delivery is not in the file or the
        features do not fit it."""
        have = sorted({str(d) for d in np.asarray(self.ds[DELIVERY].values).astype(str)})
        if self.delivery is not None and self.delivery not in have:
            raise ParameterError(f"the {role} condition's delivery {self.delivery!r} is not in "
                                 f"its file, which has {', '.join(have)}")
        check_statistics(self.ds, self.statistics)


def condition_label(cond: Condition, other: Condition) -> str:
    """How ``cond`` differs from ``other``: the parameters whose values differ (``sides=random``)
    and the delivery where it is given (``multi-turn``); ``same`` where nothing does."""
    mine, theirs = _params(cond.ds), _params(other.ds)
    parts = [f"{k}={mine.get(k)}" for k in sorted(set(mine) | set(theirs))
             if mine.get(k) != theirs.get(k) and k != "delivery"]
    if cond.delivery is not None and cond.delivery != other.delivery:
        parts.append(cond.delivery)
    return " ".join(parts) or "same"


def _params(ds: xr.Dataset) -> dict[str, object]:
    try:
        out = json.loads(str(ds.attrs.get("env_params", "{}")))
    except ValueError:
        return {}
    return dict(out) if isinstance(out, dict) else {}


@dataclass(frozen=True)
class Pair:
    """One probe question's transfer: the training condition's rows (of its file), oracle
    targets and folds, and the test condition's, each test row in the fold of its episode."""

    train_rows: I64
    train_y: F64
    train_folds: I64
    test_rows: I64
    test_y: F64
    test_folds: I64


def _oracle_rows(ds: xr.Dataset) -> tuple[NDArray[np.bool_], I64, F64]:
    """Read-outs with an oracle over all their outcomes, their outcome counts and oracles."""
    oracle = np.asarray(ds["oracle"].values, dtype=np.float64)
    k = query_n_outcome(ds)
    real = np.arange(oracle.shape[1])[None, :] < k[:, None]
    valid = np.all(np.isfinite(oracle) | ~real, axis=1) & (k >= 2)
    return valid, k, oracle


def transfer_pairs(train: Condition, test: Condition, rng: np.random.Generator, *,
                   n_folds: int = DECODER_FOLDS) -> list[Pair]:
    """The transfers of each probe question: analyze's decoder tasks of the training file
    (:func:`~belieflens.analysis.summary.decoder_tasks` from ``rng``: its folds) on the
    training condition's rows, and the test condition's rows of the same question and
    outcome count. A test episode takes its fold in the training file, an episode the
    training file lacks fold ``episode mod folds``. A question with fewer than 3 folds of
    training rows or of test rows is left out (the fits' λ and the ``within`` decoder are
    chosen by cross-validation inside the training folds)."""
    probe_tr = np.asarray(train.ds[PROBE].values).astype(str)
    ep_tr = np.asarray(train.ds[EPISODE].values).astype(np.int64)
    ep_te = np.asarray(test.ds[EPISODE].values).astype(np.int64)
    probe_te = np.asarray(test.ds[PROBE].values).astype(str)
    valid, k_te, oracle = _oracle_rows(test.ds)
    mine, theirs = train.rows(), test.rows() & valid
    out = []
    for rows, y, folds in decoder_tasks(train.ds, rng, n_folds=n_folds):
        keep = mine[rows]
        if np.unique(folds[keep]).size < 3:
            continue
        fold_of = dict(zip(ep_tr[rows].tolist(), folds.tolist(), strict=True))
        width = int(folds.max()) + 1
        at = np.flatnonzero(theirs & (probe_te == probe_tr[rows[0]]) & (k_te == y.shape[1]))
        if at.size == 0:
            continue
        t_folds = np.array([fold_of.get(int(e), int(e) % width) for e in ep_te[at]],
                           dtype=np.int64)
        if np.unique(t_folds).size < 3:
            continue
        out.append(Pair(rows[keep], y[keep], folds[keep], at,
                        oracle[at][:, : y.shape[1]], t_folds))
    return out


def layer_groups(n_layer: int, row_bytes: int, budget: int = READ_BYTES
                 ) -> list[list[int]]:
    """Consecutive layer groups whose rows (``row_bytes`` per layer) fit ``budget``."""
    per = max(1, budget // max(1, row_bytes))
    return [list(range(a, min(n_layer, a + per))) for a in range(0, n_layer, per)]


def read_rows(ds: xr.Dataset, rows: I64, layers: Sequence[int], chunk: int = 256) -> NDArray[
        np.floating]:
    """``resid`` at the sorted query ``rows`` and ``layers``, ``[row, layer, d_model]`` in its
    stored dtype, read ``chunk`` queries at a time (only spans holding a wanted row)."""
    resid = ds["resid"].isel({LAYER: list(layers)})
    out = np.empty((rows.size, len(layers), ds.sizes["d_model"]), dtype=resid.dtype)
    bounds = np.searchsorted(rows, np.arange(0, ds.sizes[QUERY] + chunk, chunk))
    for i in range(len(bounds) - 1):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        if lo < hi:
            block = np.asarray(resid.isel({QUERY: slice(i * chunk, (i + 1) * chunk)}).values)
            out[lo:hi] = block[rows[lo:hi] - i * chunk]
    return out


@dataclass
class _Rows:
    """Per-row TVDs of the test file: each source per layer, each baseline."""

    transfer: F64
    within: F64
    base_transfer: F64
    base_within: F64


def _tvd(pred: F64, y: F64) -> F64:
    return tvd_values(simplex(pred), y / y.sum(axis=1, keepdims=True), axis=1)


def _fit_pair(x_tr: F64, x_te: F64, p: Pair) -> tuple[F64, F64]:
    """One pair's transfer and within TVDs per test row, from features of its rows."""
    moved = _tvd(transfer_ridge(x_tr, p.train_y, p.train_folds, x_te, p.test_folds), p.test_y)
    own = tvd_values(heldout_distribution(x_te, p.test_y, p.test_folds),
                     p.test_y / p.test_y.sum(axis=1, keepdims=True), axis=1)
    return moved, own


def shared_baselines(train: Condition, test: Condition) -> list[str]:
    """The feature sets both conditions declare with the same width (the training side's
    order): the statistic baselines a transfer is defined for."""
    return [k for k, v in train.statistics.items()
            if k in test.statistics and np.shape(v)[1] == np.shape(test.statistics[k])[1]]


def _layers_rows(train: Condition, test: Condition, pairs: Sequence[Pair], out: _Rows) -> None:
    """Fill ``out``'s per-layer columns: every pair at every layer, layer group by group."""
    used_tr = np.unique(np.concatenate([p.train_rows for p in pairs]))
    used_te = np.unique(np.concatenate([p.test_rows for p in pairs]))
    d = train.ds.sizes["d_model"]
    itemsize = np.dtype(train.ds["resid"].dtype).itemsize
    for group in layer_groups(train.ds.sizes[LAYER], (used_tr.size + used_te.size) * d * itemsize):
        x_tr, x_te = read_rows(train.ds, used_tr, group), read_rows(test.ds, used_te, group)
        for p in pairs:
            a, b = np.searchsorted(used_tr, p.train_rows), np.searchsorted(used_te, p.test_rows)
            for i, layer in enumerate(group):
                moved, own = _fit_pair(np.asarray(x_tr[a, i], dtype=np.float64),
                                       np.asarray(x_te[b, i], dtype=np.float64), p)
                out.transfer[p.test_rows, layer] = moved
                out.within[p.test_rows, layer] = own


def _baseline_rows(train: Condition, test: Condition, pairs: Sequence[Pair],
                   names: Sequence[str], out: _Rows) -> None:
    for j, name in enumerate(names):
        f_tr = np.asarray(train.statistics[name], dtype=np.float64)
        f_te = np.asarray(test.statistics[name], dtype=np.float64)
        for p in pairs:
            moved, own = _fit_pair(f_tr[p.train_rows], f_te[p.test_rows], p)
            out.base_transfer[p.test_rows, j] = moved
            out.base_within[p.test_rows, j] = own


def transfer_values(train: Condition, test: Condition | None = None, *, seed: int = 0,
                    n_folds: int = DECODER_FOLDS) -> xr.Dataset:
    """The transfer of analyze's decoders from ``train`` to ``test`` (default: the training
    file itself, e.g. another delivery of it) per probe instance of the test condition.

    Variables: ``transfer`` and ``within`` (held-out TVD to the test condition's oracle of
    the decoder fitted on the training condition, and on the test condition itself), dims
    ``(delivery, probe, episode, turn, layer)``; ``baseline_transfer`` and
    ``baseline_within``, the same of each statistic baseline both conditions declare alike
    (:func:`shared_baselines`), dims ``(delivery, probe, episode, turn, baseline)``. Each
    instance's TVD is the mean over its rotations; NaN where the test condition has no
    read-out. Folds from ``np.random.default_rng(seed)``: analyze's."""
    test = test if test is not None else train
    train.check("training")
    test.check("test")
    if train.ds.sizes[LAYER] != test.ds.sizes[LAYER] or (
            train.ds.sizes["d_model"] != test.ds.sizes["d_model"]):
        raise ParameterError("a transfer needs residuals of one architecture: the files' "
                             "layers or widths differ")
    pairs = transfer_pairs(train, test, np.random.default_rng(seed), n_folds=n_folds)
    if not pairs:
        raise ParameterError("no probe question to transfer: the training condition needs "
                             "3 episodes or more of a question the test condition asks")
    names = shared_baselines(train, test)
    n_q, n_layer = test.ds.sizes[QUERY], test.ds.sizes[LAYER]
    rows = _Rows(*(np.full((n_q, w), np.nan) for w in (n_layer, n_layer, len(names),
                                                         len(names))))
    with FIT_BLAS_LIMIT:
        _layers_rows(train, test, pairs, rows)
        _baseline_rows(train, test, pairs, names, rows)
    return _dataset(train, test, rows, names, seed, n_folds)


def _dataset(train: Condition, test: Condition, rows: _Rows, names: Sequence[str], seed: int,
             n_folds: int) -> xr.Dataset:
    cols = [rows.transfer, rows.within, rows.base_transfer, rows.base_within]
    ends = np.cumsum([c.shape[1] for c in cols])
    every = rotation_mean(test.ds, np.concatenate(cols, axis=1), "column")  # one reshape
    part = [every.isel(column=slice(int(e) - c.shape[1], int(e))).drop_vars("column",
                                                                            errors="ignore")
            for c, e in zip(cols, ends, strict=True)]
    layers = list(range(test.ds.sizes[LAYER]))
    out = xr.Dataset({
        TRANSFER: part[0].rename(column=LAYER).assign_coords({LAYER: layers}),
        WITHIN: part[1].rename(column=LAYER).assign_coords({LAYER: layers}),
        "baseline_transfer": part[2].rename(column=BASELINE),
        "baseline_within": part[3].rename(column=BASELINE),
    }).assign_coords({BASELINE: list(names)})
    if test.delivery is not None:
        out = out.sel({DELIVERY: [test.delivery]})
    out[TRANSFER].attrs["description"] = ("held-out TVD to the test condition's oracle of the "
                                          "decoder fitted on the training condition")
    out[WITHIN].attrs["description"] = ("held-out TVD of the decoder fitted on the test "
                                        "condition itself, on the same folds")
    out.attrs.update({"train": condition_label(train, test), "test": condition_label(test, train),
                      "train_delivery": train.delivery or "all",
                      "test_delivery": test.delivery or "all", "seed": seed,
                      "n_folds": n_folds, "decoder_kind": DECODER_KIND})
    return out


def transfer_readouts(values: xr.Dataset, order: NDArray[np.int64]) -> list[Readout]:
    """:func:`transfer_values` as the floor's read-outs (sources ``transfer`` and ``within``,
    each TVD summed per episode of ``order`` and layer, its statistic baselines beside it)."""
    out = []
    for src, base in ((TRANSFER, "baseline_transfer"), (WITHIN, "baseline_within")):
        b = tuple(Readout(str(n), "tvd", *episode_totals(
            values[base].sel({BASELINE: n}, drop=True).expand_dims({LAYER: [0]}, -1), order))
            for n in values[BASELINE].values)
        out.append(Readout(src, "tvd", *episode_totals(values[src], order), baselines=b))
    return out


def pair_controls(train: Condition, test: Condition,
                  controls: Sequence[tuple[str, xr.Dataset]],
                  test_controls: Sequence[tuple[str, xr.Dataset]]
                  ) -> list[tuple[xr.Dataset, xr.Dataset]]:
    """Each untrained control of the training file beside the test file's control of the same
    network (equal ``weights_hash``); one line naming a control of another study or one
    without its pair. A transfer within one file pairs each control with itself."""
    for name, c in controls:
        check_floor(train.ds.attrs, c.attrs, name)
    same_file = test.ds is train.ds
    for name, c in test_controls:
        check_floor(test.ds.attrs, c.attrs, name)
    if same_file:
        return [(c, c) for _, c in controls]
    by_hash = {str(c.attrs.get("weights_hash")): c for _, c in test_controls}
    out = []
    for name, c in controls:
        other = by_hash.get(str(c.attrs.get("weights_hash")))
        if other is None:
            raise ParameterError(f"--floor {name}: no --transfer-floor file holds its network "
                                 "(the same --init random:SEED extracted on the test "
                                 "condition's study)")
        out.append((c, other))
    return out


def _episodes(ds: xr.Dataset) -> NDArray[np.int64]:
    return np.unique(np.asarray(ds[EPISODE].values).astype(np.int64))


def _control_values(train: Condition, test: Condition,
                    pairs: Sequence[tuple[xr.Dataset, xr.Dataset]], seed: int,
                    n_folds: int) -> Iterator[xr.Dataset]:
    for a, b in pairs:
        yield transfer_values(Condition(a, train.delivery), Condition(b, test.delivery),
                              seed=seed, n_folds=n_folds)


def transfer_floor(train: Condition, test: Condition | None = None, *,
                   controls: Sequence[tuple[str, xr.Dataset]],
                   test_controls: Sequence[tuple[str, xr.Dataset]] = (), seed: int = 0,
                   n_folds: int = DECODER_FOLDS, n_boot: int = BOOTSTRAP,
                   values: xr.Dataset | None = None) -> xr.Dataset:
    """The transfer beside its floor: the floor Dataset
    (:func:`~belieflens.analysis.floor.compare_readouts`, dims ``source``, ``layer``,
    ``control`` and ``baseline``) of the sources ``transfer`` and ``within`` of
    :func:`transfer_values`, against the same transfer between untrained networks' files of
    the two conditions (``controls``: the training file's, ``test_controls``: the test
    file's, each ``(name, Dataset)``, paired by network, :func:`pair_controls`; within one
    file, ``controls`` alone) and against each statistic baseline's transfer. Intervals over
    the test condition's episodes and the controls' seeds, corrected across layers.
    ``values``: the study's :func:`transfer_values` with ``seed``, where the caller has it."""
    test = test if test is not None else train
    pairs = pair_controls(train, test, controls, test_controls)
    mine = values if values is not None else transfer_values(train, test, seed=seed,
                                                               n_folds=n_folds)
    order = _episodes(test.ds)
    theirs = [transfer_readouts(v, order)
              for v in _control_values(train, test, pairs, seed, n_folds)]
    out = compare_readouts(transfer_readouts(mine, order), theirs,
                           n_layers=test.ds.sizes[LAYER],
                           control_labels=control_names([a.attrs for a, _ in pairs]),
                           n_boot=n_boot, seed=seed)
    out.attrs.update({k: mine.attrs[k] for k in ("train", "test", "train_delivery",
                                                 "test_delivery")})
    out.attrs["what"] = "transfer"
    return out
