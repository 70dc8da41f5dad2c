"""Interchange interventions on a learned subspace, scored by the oracle.

At each layer a rank-``k`` subspace of the residual stream at the answer position is learned
by distributed alignment search (:mod:`belieflens.interventions.das`) on pairs of training
episodes, then swapped from each source read-out into its base on **held-out** pairs: the
study's selected episodes are split (:func:`~belieflens.interventions.swaps.episode_split`)
into ``train`` (the subspace is fitted there), ``validation`` (where the best layer is chosen)
and ``test`` episodes, and every pair lies inside one split. Each swap is scored by **follow**
(:mod:`belieflens.analysis.follow`): the output's move along the oracle's move from the base's
posterior to the source's, in units of it.

Floors at the same rank ``k``, on the same held-out pairs:

- **random subspaces**: ``controls`` orthonormal bases drawn at random, swapped the same way;
- **untrained networks**: the same procedure, training included, on the study's model rebuilt
  untrained (``untrained``: ``random:SEED`` or ``shuffled:SEED``, as ``--init`` builds them);
- **count-preserving order swaps**: pairs of the ``order`` pairing (same token counts, another
  order), scored beside the ``any`` pairs: a model that updates on counts should not move
  there when its oracle does not.

Variables: ``swapped_logprob[model, pair, layer, option]`` (the learned subspace),
``control_logprob[model, pair, layer, draw, option]`` (the random ones, the same draws for
every network), the clean ``base_logprob`` / ``source_logprob[model, pair, option]``, the
learned ``basis[model, layer, d_model, rank]`` and the random ``control_basis[layer, draw,
d_model, rank]``, the training loss ``train_loss[model, layer, step]``, per pair its
``split`` and ``pairing``, ``base_query`` / ``source_query`` (indices into the study's
``query``), ``source_episode``, ``source_oracle[pair, outcome]`` and the base read-out's
coordinates, outcomes and oracle. The ``model`` coordinate is ``trained`` for the study's own
network and the ``--init`` of each untrained one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import xarray as xr

from belieflens.dims import D_MODEL, DRAW, LAYER, MODEL, OPTION, OUTCOME, PAIR, QUERY, RANK, STEP
from belieflens.errors import ParameterError, at_least
from belieflens.interventions.das import (
    LayerRows,
    Recipe,
    layer_rows,
    random_basis,
    swap_logprobs,
    train_basis,
)
from belieflens.interventions.interchange_report import INTERCHANGE
from belieflens.interventions.model import check_untrained, layer_list, untrained_model
from belieflens.interventions.pairs import Pair, check_aligned
from belieflens.interventions.readouts import Selection, StudyReadouts, with_table
from belieflens.interventions.run import OnProgress, Plan
from belieflens.interventions.swaps import (
    PAIRINGS,
    Pairing,
    Split,
    episode_split,
    instance_pairs,
)
from belieflens.model.load import LoadedModel

F64 = np.ndarray


@dataclass(frozen=True)
class InterchangeOptions:
    """How to learn and swap the subspace: layers, rank, the training recipe, the held-out
    share of episodes, the floors (random subspaces, untrained networks, pairings) and seed.

    Passed to :func:`belieflens.interchange`; the result file holds
    ``swapped_logprob[model, pair, layer, option]`` beside its floors.

    Examples:
        >>> options = belieflens.InterchangeOptions(layers=(2, 4), rank=1,
        ...                                         untrained=("random:0",))
        >>> options.rank, options.pairings, options.heldout
        (1, ('any', 'order'), 0.5)
    """

    kind: ClassVar[str] = INTERCHANGE.name
    need: ClassVar[tuple[str, ...]] = ()

    layers: tuple[int, ...] | None = None
    """Layers to learn a subspace at (0 = embeddings .. L); ``None``: all."""
    rank: int = 1
    """The subspace's dimension ``k`` (1 .. d_model)."""
    steps: int = 200
    """Optimiser steps of each subspace."""
    lr: float = 0.01
    """Adam's learning rate."""
    batch_pairs: int = 64
    """Training pairs per step (and pairs per forward when scoring)."""
    heldout: float = 0.5
    """Share of the episodes held out (half validation, half test); the rest train."""
    controls: int = 3
    """Random subspaces of the same rank swapped as the floor."""
    pairings: tuple[Pairing, ...] = PAIRINGS
    """Pairings scored (:mod:`~belieflens.interventions.swaps`); training pairs are ``any``."""
    untrained: tuple[str, ...] = ()
    """Untrained networks run through the same procedure (``random:SEED``, ``shuffled:SEED``)."""
    seed: int = 0
    """Seed of the split, the initial bases, the order of training pairs and the controls."""

    def __post_init__(self) -> None:
        at_least("--rank", self.rank, 1)
        at_least("--steps", self.steps, 1)
        at_least("--batch-size", self.batch_pairs, 1)
        at_least("--controls", self.controls, 1)
        if not 0.0 < self.heldout < 1.0:
            raise ParameterError(f"option '--heldout' = {self.heldout:g} is not allowed: a "
                                 "share of the episodes strictly between 0 and 1")
        if not self.lr > 0:
            raise ParameterError(f"option '--lr' = {self.lr:g} is not allowed: a positive "
                                 "learning rate")
        if not self.pairings or any(p not in PAIRINGS for p in self.pairings):
            raise ParameterError(f"option '--pairing' = {','.join(self.pairings)!r} is not "
                                 f"allowed: one or more of {', '.join(PAIRINGS)}")
        check_untrained(self.untrained)
        if self.layers is not None and not self.layers:
            raise ParameterError("option '--layers' is empty")

    def recipe(self) -> Recipe:
        """The training recipe of every subspace."""
        return Recipe(rank=self.rank, steps=self.steps, lr=self.lr,
                      batch_pairs=self.batch_pairs, seed=self.seed)

    def plan(self, study: StudyReadouts, select: Selection) -> Plan:
        """Split the selected episodes, pair each split, check the pairs; the model's width
        and layers are checked when it loads."""
        check_rank(self.rank, study.d_model)
        design = pair_design(study, select, self)
        settings = {k: v for k, v in dataclasses.asdict(self).items()}
        settings.update(turns=select.turns, probes=select.probes,
                        deliveries=select.deliveries, train_pairs=len(design.train))
        return Plan(settings, lambda model, progress: interchange_logprobs(
            model, study, design, self, on_progress=progress))


def check_rank(rank: int, d_model: int) -> None:
    """Refuse (one line) a rank above the residual width ``d_model`` (0: not known yet)."""
    if d_model and rank > d_model:
        raise ParameterError(f"option '--rank' = {rank} is not allowed: a subspace rank in "
                             f"1..{d_model} (the model's d_model)")


@dataclass(frozen=True)
class Design:
    """The pairs of an interchange run: those it trains on, and those it scores with their
    split and pairing."""

    train: tuple[Pair, ...]
    scored: tuple[Pair, ...]
    split: tuple[Split, ...]
    pairing: tuple[Pairing, ...]


def pair_design(study: StudyReadouts, select: Selection, options: InterchangeOptions
                ) -> Design:
    """Split the selected read-outs' episodes (seeded) and pair each split (module
    docstring); one line when a split has no pair or a read-out has multi-token options."""
    rows = select.rows(study)
    episodes = np.asarray(study.table["episode"].values)[rows]
    split_of = episode_split(episodes, options.heldout, np.random.default_rng(options.seed))
    by_split: dict[Split, tuple[int, ...]] = {}
    for e, s in sorted(split_of.items()):
        by_split[s] = (*by_split.get(s, ()), e)
    train = instance_pairs(study, dataclasses.replace(select, episodes=by_split["train"]), "any")
    scored: list[Pair] = []
    split: list[Split] = []
    pairing: list[Pairing] = []
    for s in ("validation", "test"):
        for p in options.pairings:
            got = instance_pairs(study, dataclasses.replace(select, episodes=by_split[s]), p)
            scored += got
            split += [s] * len(got)
            pairing += [p] * len(got)
    tested = {p for p, s in zip(pairing, split, strict=True) if s == "test"}
    if not train or ("any" in options.pairings and "any" not in tested):
        raise ParameterError("too few pairs: the training or the test episodes hold no two "
                             "episodes that differ at a selected turn (select more episodes)")
    if not scored:
        raise ParameterError("no held-out pairs of the pairing asked for (--pairing): no two "
                             "held-out episodes hold the same tokens in another order")
    check_aligned(study, [*train, *scored])
    multi = [p.base for p in (*train, *scored)
             if any(len(o) != 1 for o in study.queries[p.base].option_ids)]
    if multi:
        raise ParameterError(f"read-out {multi[0]} has options of several tokens: a subspace "
                             "swap reads single-token options (select a probe whose options "
                             "are one token each)")
    return Design(tuple(train), tuple(scored), tuple(split), tuple(pairing))


def _rows(model: LoadedModel, study: StudyReadouts, pairs: Sequence[Pair],
          layers: Sequence[int]) -> dict[int, LayerRows]:
    """The pairs at every layer, their target the source's oracle in the base's option
    order."""
    oracle = np.asarray(study.table["oracle"].values, dtype=np.float64)
    outcome = np.asarray(study.table["outcome"].values, dtype=np.int64)
    n_opt = max(len(study.queries[p.base].option_ids) for p in pairs)
    target = np.zeros((len(pairs), n_opt))
    for i, p in enumerate(pairs):
        shown = outcome[p.base][: len(study.queries[p.base].option_ids)]
        target[i, : shown.size] = np.nan_to_num(oracle[p.source][shown])
    return layer_rows(model, [study.queries[p.base] for p in pairs],
                      [study.queries[p.source] for p in pairs], target, layers)


@dataclass
class NetworkResult:
    """What one network's run gives (mutable while it fills)."""

    swapped: F64
    control: F64
    base: F64
    source: F64
    basis: F64
    loss: F64


def run_network(model: LoadedModel, study: StudyReadouts, design: Design,
                options: InterchangeOptions, layers: Sequence[int],
                controls: F64, tick: Callable[[], None]) -> NetworkResult:
    """Train the subspace at every layer of one network and swap it, and the random
    ``controls [layer, draw, d_model, rank]``, into the scored pairs."""
    d = model.info.d_model
    check_rank(options.rank, d)
    n, n_opt, n_draw = len(design.scored), 0, controls.shape[1]
    train = _rows(model, study, design.train, layers)
    scored = _rows(model, study, design.scored, layers)
    n_opt = scored[layers[0]].base_logprob.shape[1]
    out = NetworkResult(
        np.full((n, len(layers), n_opt), np.nan), np.full((n, len(layers), n_draw, n_opt), np.nan),
        scored[layers[0]].base_logprob, scored[layers[0]].source_logprob,
        np.zeros((len(layers), d, options.rank)), np.zeros((len(layers), options.steps)))
    for li, layer in enumerate(layers):
        out.basis[li], out.loss[li] = train_basis(model, train[layer], layer, options.recipe())
        out.swapped[:, li] = swap_logprobs(model, scored[layer], layer, out.basis[li])
        for k in range(n_draw):
            out.control[:, li, k] = swap_logprobs(model, scored[layer], layer, controls[li, k])
        tick()
    return out


def interchange_logprobs(model: LoadedModel, study: StudyReadouts, design: Design,
                         options: InterchangeOptions = InterchangeOptions(), *,
                         on_progress: OnProgress | None = None) -> xr.Dataset:
    """Learn and swap the subspace on ``model`` and each untrained network of ``options``
    (module docstring for the variables). ``on_progress(done, total)`` after each layer of
    each network."""
    layers = layer_list(options.layers, model.info.n_layers)
    check_rank(options.rank, model.info.d_model)
    rng = np.random.default_rng(options.seed)
    controls = np.stack([np.stack([random_basis(model.info.d_model, options.rank, rng)
                                   for _ in range(options.controls)]) for _ in layers])
    names = ("trained", *options.untrained)
    total, done = len(names) * len(layers), [0]

    def tick() -> None:
        done[0] += 1
        if on_progress is not None:
            on_progress(done[0], total)

    results = [run_network(model, study, design, options, layers, controls, tick)]
    for init in options.untrained:
        results.append(run_network(untrained_model(model, init), study, design, options,
                                   layers, controls, tick))
    return _dataset(study, design, layers, names, results, controls)


def _dataset(study: StudyReadouts, design: Design, layers: Sequence[int], names: Sequence[str],
             results: Sequence[NetworkResult], controls: F64) -> xr.Dataset:
    """The result variables (module docstring)."""
    pairs = design.scored
    b_idx = np.array([p.base for p in pairs], dtype=np.int64)
    s_idx = np.array([p.source for p in pairs], dtype=np.int64)
    src_t = study.select(s_idx).rename({QUERY: PAIR})

    def stack(name: str) -> F64:
        return np.stack([getattr(r, name) for r in results])

    n_opt = results[0].swapped.shape[-1]
    ds = xr.Dataset(
        {
            "swapped_logprob": ((MODEL, PAIR, LAYER, OPTION), stack("swapped")),
            "control_logprob": ((MODEL, PAIR, LAYER, DRAW, OPTION), stack("control")),
            "base_logprob": ((MODEL, PAIR, OPTION), stack("base")),
            "source_logprob": ((MODEL, PAIR, OPTION), stack("source")),
            "basis": ((MODEL, LAYER, D_MODEL, RANK), stack("basis")),
            "control_basis": ((LAYER, DRAW, D_MODEL, RANK), controls),
            "train_loss": ((MODEL, LAYER, STEP), stack("loss")),
            "split": (PAIR, np.asarray(design.split, dtype=object)),
            "pairing": (PAIR, np.asarray(design.pairing, dtype=object)),
            "base_query": (PAIR, b_idx.astype(np.int32)),
            "source_query": (PAIR, s_idx.astype(np.int32)),
            "source_episode": (PAIR, np.asarray(src_t["episode"].values, dtype=np.int32)),
            "source_oracle": ((PAIR, OUTCOME), np.asarray(src_t["oracle"].values)),
        },
        coords={MODEL: np.asarray(names, dtype=object), LAYER: np.asarray(layers, dtype=np.int32)},
    )
    ds = with_table(ds, study.select(b_idx).rename({QUERY: PAIR}), n_opt)
    ds.attrs["train_pairs"] = len(design.train)
    ds.attrs["train_episodes"] = np.unique(np.asarray(
        study.table["episode"].values)[[p.base for p in design.train]]).astype(np.int32)
    ds["swapped_logprob"].attrs["description"] = (
        "log P(option) of the base read-out with the learned subspace's component at its "
        "answer position taken from the source")
    ds["control_logprob"].attrs["description"] = (
        "the same with a random subspace of the same rank (control_basis)")
    ds["split"].attrs["description"] = "validation or test: the pair's episodes were held out"
    ds["pairing"].attrs["description"] = (
        "any: differing episodes; order: the same token counts in another order")
    return ds
