"""Pairs of read-outs for interchange patching, and the position sets patched.

A pair ``(base, source)`` names two queries of one study (indices into its ``query``). Its
positions are **aligned by role** (:mod:`belieflens.interventions.align`), by the spans the
renderer recorded: turn t's evidence with turn t's, each template piece with the same piece,
the question with the question, the answer position with the answer position, so contexts of
different lengths pair too; a base position with no counterpart is never patched and is
listed in the file. A pair whose options differ or whose
answer positions hold different tokens cannot be aligned, and is refused in one line naming
the first (:func:`check_aligned`).

:func:`pair_instances` builds pairs from a study: within each (delivery, probe, turn), the
queries of every episode are paired, rotation by rotation, with those of the next episode
(in episode order, cyclically) whose read-outs can be aligned for every rotation and differ
in at least one token — for coin flip, episodes with different flips so far at the same
turn, whatever their lengths. Whole probe instances are paired so that a pair's beliefs can
be debiased over rotations.

Position sets (:data:`POSITION_SETS`):

- ``answer``: the answer position (the last context token, where the answer is read);
- ``evidence``: the base context positions in evidence spans (a turn's evidence or a summary
  of it) that have a counterpart — for coin flip, the flips and their counts;
- ``all``: every position of the row that has a counterpart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from belieflens.errors import ParameterError
from belieflens.interventions.align import align, why_unaligned
from belieflens.interventions.forward import RowBatch
from belieflens.interventions.readouts import Selection, StudyReadouts
from belieflens.readouts.render import SUMMARY, TokenizedQuery

PositionSet = Literal["answer", "evidence", "all"]
"""Which positions of the base run take the source's residual."""

POSITION_SETS: tuple[PositionSet, ...] = get_args(PositionSet)


@dataclass(frozen=True)
class Pair:
    """A base read-out run with a source read-out's residual patched in.

    Examples:
        >>> belieflens.Pair(base=3, source=17)
        Pair(base=3, source=17)
        >>> belieflens.PatchOptions(pairs=(belieflens.Pair(3, 17),)).pairs
        (Pair(base=3, source=17),)
    """

    base: int
    """Index of the base query in the study."""
    source: int
    """Index of the source query in the study."""


def misalignment(base: TokenizedQuery, source: TokenizedQuery) -> str:
    """Why two read-outs cannot be aligned by role, or ``''``."""
    return why_unaligned(base, source)


def check_aligned(study: StudyReadouts, pairs: Sequence[Pair]) -> None:
    """Refuse (one line naming the first offending pair) pairs that are out of range or
    misaligned."""
    if not pairs:
        raise ParameterError("no pairs to patch: the study has no aligned read-outs that "
                             "differ (try other --turn, --probe or more episodes)")
    n = study.n_query
    for i, pair in enumerate(pairs):
        for q in (pair.base, pair.source):
            if not 0 <= q < n:
                raise ParameterError(
                    f"pair {i} (base {pair.base}, source {pair.source}): query {q} is not "
                    f"in the study (0..{n - 1})"
                )
        why = misalignment(study.queries[pair.base], study.queries[pair.source])
        if why:
            raise ParameterError(
                f"pair {i} (base query {pair.base}, source query {pair.source}) cannot be "
                f"aligned by role: {why}"
            )


def check_evidence(study: StudyReadouts, pairs: Sequence[Pair]) -> None:
    """Refuse ``--positions evidence`` (one line naming the study's environment) when no base
    read-out of ``pairs`` marks evidence in its context: the set would patch nothing."""
    if any(_has_evidence(study.queries[p.base]) for p in pairs):
        return
    env = study.attrs.get("env_name", "the study's environment")
    raise ParameterError(
        f"--positions evidence: the {env} read-outs selected mark no evidence spans (no token "
        f"of a turn's evidence in their contexts): choose --positions answer or all")


def _has_evidence(query: TokenizedQuery) -> bool:
    return any(c >= 1 or c == SUMMARY for c in query.spans)


def parse_pair(text: str) -> Pair:
    """``'BASE:SOURCE'`` (two query indices) as a :class:`Pair`, or one line."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        return Pair(int(parts[0]), int(parts[1]))
    except ValueError:
        raise ParameterError(
            f"option '--pair' = {text!r} is not allowed: BASE:SOURCE, two query indices"
        ) from None


def pair_instances(study: StudyReadouts, select: Selection | None = None) -> list[Pair]:
    """Aligned, differing pairs of whole probe instances among the read-outs ``select``
    names (default: all; see the module docstring)."""
    t = study.table
    episode = np.asarray(t["episode"].values, dtype=np.int64)
    turn = np.asarray(t["turn"].values, dtype=np.int64)
    rotation = np.asarray(t["rotation"].values, dtype=np.int64)
    probe = np.asarray(t["probe"].values).astype(str)
    delivery = np.asarray(t["delivery"].values).astype(str)
    keep = (select or Selection()).mask(study)
    groups: dict[tuple[str, str, int], dict[int, dict[int, int]]] = {}
    for q in np.flatnonzero(keep):
        key = (str(delivery[q]), str(probe[q]), int(turn[q]))
        groups.setdefault(key, {}).setdefault(int(episode[q]), {})[int(rotation[q])] = int(q)
    pairs: list[Pair] = []
    for key in sorted(groups):
        by_ep = groups[key]
        eps = sorted(by_ep)
        for i, e in enumerate(eps):
            for step in range(1, len(eps)):
                other = eps[(i + step) % len(eps)]
                if _instances_pair(study, by_ep[e], by_ep[other]):
                    pairs.extend(Pair(by_ep[e][r], by_ep[other][r]) for r in sorted(by_ep[e]))
                    break
    return pairs


def _instances_pair(study: StudyReadouts, base: dict[int, int], source: dict[int, int]) -> bool:
    if sorted(base) != sorted(source):
        return False
    qs = study.queries
    if any(misalignment(qs[base[r]], qs[source[r]]) for r in base):
        return False
    return any(qs[base[r]].context_ids != qs[source[r]].context_ids for r in base)


def position_masks(base: RowBatch, source: RowBatch
                   ) -> tuple[dict[PositionSet, NDArray[np.bool_]], NDArray[np.int64]]:
    """Each position set as a mask ``[row, position]`` over the base batch's rows, and the
    source position aligned with each base position ``[row, position]`` (-1: none)."""
    n, w = len(base.rows), base.width
    masks: dict[PositionSet, NDArray[np.bool_]] = {
        s: np.zeros((n, w), dtype=bool) for s in POSITION_SETS
    }
    where = np.full((n, w), -1, dtype=np.int64)
    for i, rb in enumerate(base.rows):
        qb, qs = base.queries[rb.query], source.queries[rb.query]
        a = align(qb, qs)
        where[i] = a.row_map(len(rb.ids), len(qs.context_ids), w)
        ctx = len(qb.context_ids)
        masks["answer"][i, rb.answer_pos] = True
        masks["evidence"][i, :ctx] = a.evidence & (a.source_of >= 0)
        masks["all"][i] = where[i] >= 0
    return masks, where


def same_length(study: StudyReadouts, pairs: Sequence[Pair]) -> int:
    """How many of ``pairs`` have contexts of one length (the pairs position-by-position
    alignment alone would allow)."""
    qs = study.queries
    return sum(len(qs[p.base].context_ids) == len(qs[p.source].context_ids) for p in pairs)
