"""Span-based patching reaches the evidence: on ProteinWorld and dice read-outs of two episodes
(rendered with the embedded model's tokenizer), the ``evidence`` position set is not empty,
every position it patches lies inside a marked evidence span, and the tokens where the two
episodes' evidence differs are among them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.episodes.base import Query
from belieflens.interventions.forward import RowBatch
from belieflens.interventions.pairs import position_masks
from belieflens.readouts.render import SUMMARY, TokenizedQuery, bos_policy, render


def _query(name: str, params: dict[str, Any], episode: int, turn: int, probe: str) -> Query:
    eps = list(envs.get(name, **params).episodes(episode + 1, seed=0))
    (found,) = [p for p in eps[episode].turns[turn].probes if p.name == probe][:1]
    return found.queries[0]


def _evidence(q: TokenizedQuery) -> np.ndarray:
    codes = np.asarray(q.spans)
    return np.asarray((codes >= 1) | (codes == SUMMARY))


DICE: dict[str, Any] = dict(variant="independent", dice=1, faces=6, stated="first")
"""One die, a stated earlier roll: episodes differ in that roll only."""

CASES = {
    "protein-world single-turn": (
        "protein-world", dict(sequence="random", stated="off", delivery="single-turn",
                              classes=3, attributes=3, steps=2), 2, "class", (0, 1)),
    "protein-world multi-turn": (
        "protein-world", dict(sequence="random", stated="off", delivery="multi-turn",
                              classes=3, attributes=3, steps=2), 2, "class", (0, 1)),
    "dice (raw completion)": ("dice", DICE, 0, "revealed", (0, 3)),
    "dice (stated question)": ("dice", DICE, 0, "stated", (0, 3)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_evidence_positions_lie_in_the_marked_spans_and_cover_what_differs(
    case: str, smol_tokenizer: Any
) -> None:
    name, params, turn, probe, (a, b) = CASES[case]
    bos = bos_policy(smol_tokenizer)
    base, source = (render(smol_tokenizer, _query(name, params, e, turn, probe), bos=bos)
                    for e in (a, b))
    assert base.context_ids != source.context_ids
    masks, where = position_masks(RowBatch.of([base]), RowBatch.of([source]))
    ctx = len(base.context_ids)
    patched = masks["evidence"][0, :ctx]
    marked = _evidence(base)
    assert patched.any(), case  # --positions evidence is not empty
    assert not (patched & ~marked).any(), case  # and only ever patches marked evidence
    # every base token that differs from its counterpart in the source is evidence, patched
    src = np.asarray(source.context_ids)
    differs = np.array([where[0, p] < 0 or base.context_ids[p] != src[where[0, p]]
                        for p in range(ctx)])
    assert not (differs & ~marked).any(), case
    assert (patched | (where[0, :ctx] < 0))[differs].all(), case
