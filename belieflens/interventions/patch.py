"""Interchange patching: run a base read-out with a source read-out's residual stream patched
in at one layer over a set of positions, for every layer and position set.

For each batch of pairs the base and source rows run once, clean, keeping the residual
stream of every layer at every position (:func:`belieflens.interventions.forward.clean_run`).
A patch at layer ``l`` then takes the base's layer-``l`` residual, puts the source's in at
the patched positions, and runs only blocks ``l .. L-1`` on top, from the first patched
position on, the earlier positions' keys and values read from the base's clean run
(:func:`~belieflens.interventions.forward.run_edited`); the position sets of a layer run
together. ``reuse=False`` runs instead one full forward per (pair, layer, position set) with a
hook that replaces the layer-``l`` residual
(:func:`~belieflens.interventions.forward.run_replaced`): the same numbers, the reference
``bench/intervene.py`` compares against.

The result (:func:`patch_logprobs`, written by :func:`belieflens.patch`) has ``patched_logprob[pair,
layer, positions, option]``, the clean ``base_logprob`` and ``source_logprob[pair, option]``,
``base_query`` / ``source_query[pair]`` (indices into the study's ``query``),
``n_patched[pair, positions]`` and the base read-out's coordinates, outcomes and oracle
(plus ``source_episode`` and ``source_oracle``), so that analysis needs no study file.

Positions are aligned by the episode's own spans (:mod:`belieflens.interventions.align`): the
source's residual patched in at base position ``p`` is the one at ``p``'s counterpart (the same
role: turn t's evidence, the same template piece, the question), so pairs whose contexts
differ in length are patched too. ``unaligned_positions[pair]`` lists the base positions
without a counterpart (never patched; ``n_unaligned``), and the attributes
``pairs_same_length`` and ``pairs_gained`` count the pairs of one context length and those
the alignment adds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
import xarray as xr

from belieflens.dims import LAYER, MODEL, OPTION, OUTCOME, PAIR, POSITIONS, QUERY
from belieflens.errors import ParameterError, at_least, choice
from belieflens.interventions.align import align
from belieflens.interventions.belief import patch_reads
from belieflens.interventions.forward import RowBatch, clean_run, run_edited, run_replaced
from belieflens.interventions.model import check_untrained, layer_list, untrained_model
from belieflens.interventions.pairs import (
    POSITION_SETS,
    Pair,
    PositionSet,
    check_aligned,
    check_evidence,
    position_masks,
    same_length,
)
from belieflens.interventions.patch_report import PATCH
from belieflens.interventions.readouts import Selection, StudyReadouts, with_table
from belieflens.interventions.run import Plan
from belieflens.interventions.swaps import PAIRINGS, Pairing, instance_pairs
from belieflens.model.load import LoadedModel


@dataclass(frozen=True)
class PatchOptions:
    """How to patch: which pairs, layers and position sets, how many pairs per batch.

    Passed to :func:`belieflens.patch`; the result file holds
    ``patched_logprob[pair, layer, positions, option]``.

    Examples:
        >>> options = belieflens.PatchOptions(layers=(0, 15, 30), positions=("answer",))
        >>> options.layers, options.positions, options.reuse
        ((0, 15, 30), ('answer',), True)
    """

    kind: ClassVar[str] = PATCH.name
    need: ClassVar[tuple[str, ...]] = ()

    layers: tuple[int, ...] | None = None
    """Layers to patch (0 = embeddings .. L); ``None``: all."""
    positions: tuple[PositionSet, ...] = POSITION_SETS
    """Position sets to patch (see :mod:`belieflens.interventions.pairs`)."""
    batch_pairs: int = 8
    """Pairs run together (each costs residuals of every layer at every position, twice)."""
    reuse: bool = True
    """Run only blocks ``l..L-1``, from the first patched position on, reusing the clean
    run's keys and values before it (``False``: full forwards)."""
    pairs: tuple[Pair, ...] | None = None
    """Explicit (base, source) query pairs; ``None``: the ``pairing``'s pairs of probe
    instances among the selected read-outs
    (:func:`~belieflens.interventions.swaps.instance_pairs`)."""
    pairing: Pairing = "any"
    """How episodes pair: ``any`` (differing), ``order`` (count-preserving order swaps:
    :mod:`~belieflens.interventions.swaps`), the floor of an updater that counts."""
    untrained: tuple[str, ...] = ()
    """Untrained networks patched the same way, the floor (``random:SEED``,
    ``shuffled:SEED``)."""

    def __post_init__(self) -> None:
        at_least("--batch-size", self.batch_pairs, 1)
        choice("--pairing", self.pairing, PAIRINGS)
        check_untrained(self.untrained)
        if not self.positions:
            raise ParameterError("option '--positions' is empty: name at least one of "
                                 + ", ".join(POSITION_SETS))
        if self.layers is not None and not self.layers:
            raise ParameterError("option '--layers' is empty")

    def plan(self, study: StudyReadouts, select: Selection) -> Plan:
        """Patch the explicit pairs, or pairs of the selected read-outs' probe instances
        (episodes pair with each other, so ``select`` may not name them); the provenance
        keeps today's ``option_*`` attributes (turns, probes, deliveries, explicit_pairs)."""
        if select.episodes is not None:
            raise ParameterError("patch pairs episodes with each other: select its read-outs "
                                 "by turn, probe and delivery, or pass explicit pairs")
        chosen = (list(self.pairs) if self.pairs is not None
                  else instance_pairs(study, select, self.pairing))
        check_aligned(study, chosen)
        if "evidence" in self.positions:
            check_evidence(study, chosen)
        settings = {k: v for k, v in asdict(self).items() if k != "pairs"}
        settings.update(turns=select.turns, probes=select.probes, deliveries=select.deliveries,
                        explicit_pairs=self.pairs is not None)
        pairing = "explicit" if self.pairs is not None else self.pairing
        return Plan(settings, lambda model, progress: with_untrained(patch_logprobs(
            model, study, chosen, self, on_progress=progress), model, study, chosen, self
        ).assign(pairing=(PAIR, np.full(len(chosen), pairing, dtype=object))), patch_reads)


def with_untrained(ds: xr.Dataset, model: LoadedModel, study: StudyReadouts,
                   pairs: Sequence[Pair], options: PatchOptions) -> xr.Dataset:
    """``ds`` with the same patches on each untrained network of ``options``:
    ``untrained_patched_logprob[model, pair, layer, positions, option]`` and the clean
    ``untrained_base_logprob`` / ``untrained_source_logprob[model, pair, option]``, the
    ``model`` coordinate each network's ``--init``."""
    if not options.untrained:
        return ds
    runs = [patch_logprobs(untrained_model(model, init), study, pairs, options)
            for init in options.untrained]
    for name in ("patched_logprob", "base_logprob", "source_logprob"):
        ds[f"untrained_{name}"] = xr.concat([r[name] for r in runs], dim=MODEL)
        ds[f"untrained_{name}"].attrs["description"] = (
            f"{name} of the same pairs on each untrained network")
    return ds.assign_coords({MODEL: np.asarray(options.untrained, dtype=object)})


def patch_logprobs(
    model: LoadedModel,
    study: StudyReadouts,
    pairs: Sequence[Pair],
    options: PatchOptions = PatchOptions(),
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> xr.Dataset:
    """Patch every pair at every layer and position set of ``options``; see the module
    docstring for the variables. ``on_progress(pairs done, pairs)`` after each batch."""
    import torch

    check_aligned(study, pairs)
    layers = layer_list(options.layers, model.info.n_layers)
    sets = options.positions
    n_opt = max(len(study.queries[p.base].option_ids) for p in pairs)
    patched = np.full((len(pairs), len(layers), len(sets), n_opt), np.nan)
    base_lp = np.full((len(pairs), n_opt), np.nan)
    source_lp = np.full((len(pairs), n_opt), np.nan)
    n_patched = np.zeros((len(pairs), len(sets)), dtype=np.int32)
    for start in range(0, len(pairs), options.batch_pairs):
        chunk = pairs[start : start + options.batch_pairs]
        sl = slice(start, start + len(chunk))
        base = RowBatch.of([study.queries[p.base] for p in chunk])
        source = RowBatch.of([study.queries[p.source] for p in chunk])
        masks, where = position_masks(base, source)
        cb = clean_run(model, base, keep_cache=options.reuse, layers=layers)
        cs = clean_run(model, source, keep_cache=False, layers=layers)
        base_lp[sl, : cb.logprob.shape[1]] = cb.logprob
        source_lp[sl, : cs.logprob.shape[1]] = cs.logprob
        first_row = _first_rows(base)
        lengths = base.lengths()
        for j, s in enumerate(sets):
            m = masks[s][first_row]
            n_patched[sl, j] = (m & (np.arange(base.width)[None, :] < lengths[first_row, None])
                                ).sum(axis=1)
        tiled = base.tile(len(sets))
        device = cb.resid[layers[0]].device
        mask = torch.tensor(np.concatenate([masks[s] for s in sets]),
                            device=device)[:, :, None]
        rows_ = torch.arange(where.shape[0], device=device)[:, None]
        at = torch.as_tensor(np.maximum(where, 0), device=device)
        for li, layer in enumerate(layers):
            b_res = cb.resid[layer].repeat(len(sets), 1, 1)
            s_res = cs.resid[layer][rows_, at].repeat(len(sets), 1, 1)
            res = torch.where(mask, s_res, b_res)
            lp = (run_edited(model, tiled, layer, res, cb) if options.reuse
                  else run_replaced(model, tiled, layer, res))
            patched[sl, li, :, : lp.shape[1]] = lp.reshape(len(sets), len(chunk), -1
                                                           ).transpose(1, 0, 2)
        del cb, cs
        if on_progress is not None:
            on_progress(start + len(chunk), len(pairs))
    ds = _dataset(study, pairs, layers, sets, patched, base_lp, source_lp, n_patched)
    return _with_alignment(ds, study, pairs)


def _with_alignment(ds: xr.Dataset, study: StudyReadouts, pairs: Sequence[Pair]) -> xr.Dataset:
    """``ds`` with each pair's base positions that have no counterpart in the source
    (``unaligned_positions``, comma-separated; ``n_unaligned``) and, in its attributes, how
    many pairs have one context length (``pairs_same_length``) and how many more the role
    alignment admits (``pairs_gained``)."""
    lists = [align(study.queries[p.base], study.queries[p.source]).unaligned for p in pairs]
    ds["unaligned_positions"] = (PAIR, np.array([",".join(map(str, u)) for u in lists],
                                                dtype=object))
    ds["n_unaligned"] = (PAIR, np.array([len(u) for u in lists], dtype=np.int32))
    ds["unaligned_positions"].attrs["description"] = (
        "base context positions with no counterpart in the source (never patched)")
    same = same_length(study, pairs)
    ds.attrs["pairs_same_length"] = same
    ds.attrs["pairs_gained"] = len(pairs) - same
    return ds


def _first_rows(batch: RowBatch) -> np.ndarray:
    """Index of each query's first row."""
    first: dict[int, int] = {}
    for i, r in enumerate(batch.rows):
        first.setdefault(r.query, i)
    return np.array([first[q] for q in range(len(batch.queries))], dtype=np.int64)


def _dataset(study: StudyReadouts, pairs: Sequence[Pair], layers: Sequence[int],
             sets: Sequence[PositionSet], patched: np.ndarray, base_lp: np.ndarray,
             source_lp: np.ndarray, n_patched: np.ndarray) -> xr.Dataset:
    b_idx = np.array([p.base for p in pairs], dtype=np.int64)
    s_idx = np.array([p.source for p in pairs], dtype=np.int64)
    base_t = study.select(b_idx).rename({QUERY: PAIR})
    src_t = study.select(s_idx).rename({QUERY: PAIR})
    n_opt = patched.shape[-1]
    ds = xr.Dataset(
        {
            "patched_logprob": ((PAIR, LAYER, POSITIONS, OPTION), patched),
            "base_logprob": ((PAIR, OPTION), base_lp),
            "source_logprob": ((PAIR, OPTION), source_lp),
            "base_query": (PAIR, b_idx.astype(np.int32)),
            "source_query": (PAIR, s_idx.astype(np.int32)),
            "n_patched": ((PAIR, POSITIONS), n_patched),
            "source_episode": (PAIR, np.asarray(src_t["episode"].values, dtype=np.int32)),
            "source_oracle": ((PAIR, OUTCOME), np.asarray(src_t["oracle"].values)),
        },
        coords={LAYER: np.asarray(layers, dtype=np.int32),
                POSITIONS: np.asarray(list(sets), dtype=object)},
    )
    ds = with_table(ds, base_t, n_opt)
    ds["patched_logprob"].attrs["description"] = (
        "log P(option) of the base read-out with the source's residual at layer l patched "
        "in over the position set")
    ds["base_query"].attrs["description"] = "index of the base read-out in the study's query"
    ds["source_query"].attrs["description"] = "index of the source read-out in the study's query"
    ds["n_patched"].attrs["description"] = "number of positions patched"
    ds[POSITIONS].attrs["description"] = (
        "answer: the answer position; evidence: the context positions of the evidence spans "
        "(each turn's evidence, a summary) with a counterpart; all: every position with one")
    return ds
