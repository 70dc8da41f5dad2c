"""Patch alignment by the episode's own spans: equal-length contexts whose template and evidence
sit at different places, unequal lengths whose tokens repeat inside the evidence, and a
multi-turn recommender pair rendered by the real tokenizer."""

from __future__ import annotations

from typing import Any

import belieflens.envs as envs
from belieflens.interventions.align import align, segments
from belieflens.readouts.render import (
    QUESTION,
    SUMMARY,
    TEMPLATE,
    TokenizedQuery,
    bos_policy,
    render,
)

T, Q = TEMPLATE, QUESTION
ROLLED, AND, ASK, H, TT = 50, 51, 52, 60, 61
"""Token ids of the synthetic read-outs (``rolled``, ``and``, the question, heads, tails)."""


def readout(ids: tuple[int, ...], spans: tuple[int, ...]) -> TokenizedQuery:
    return TokenizedQuery(ids, ((9,), (10,)), (0, 1), "", spans)


def test_equal_lengths_never_map_the_template_onto_evidence() -> None:
    """Base ``rolled 1 2 and 3`` against source ``rolled 1 and 3 4`` (both five tokens): by
    position the base's ``and`` met the source's evidence ``3`` and nothing was listed."""
    base = readout((ROLLED, 1, 2, AND, 3, ASK), (T, 1, 2, T, 3, Q))
    source = readout((ROLLED, 1, AND, 3, 4, ASK), (T, 1, T, 2, 3, Q))
    a = align(base, source)
    assert a.source_of[3] != 3  # "and" is not paired with the evidence "3"
    for p, s in enumerate(a.source_of.tolist()):
        if s >= 0 and p != len(base.context_ids) - 1:
            assert base.spans[p] == source.spans[s], (p, s)  # pairs share their role
    assert a.unaligned == (3,)  # the base's "and" has no counterpart: listed, not guessed
    assert a.source_of.tolist() == [0, 1, 3, -1, 4, 5]
    assert a.evidence.tolist() == [False, True, True, False, True, False]


def test_unequal_lengths_pair_flips_by_turn_however_tokens_repeat() -> None:
    """``H T H T H`` against ``T T``: matched on tokens, the repeated flips were taken for
    template and left out of the evidence; by spans flip t meets flip t."""
    base = readout((0, H, TT, H, TT, H), (T, 1, 2, 3, 4, 5))
    source = readout((0, TT, H), (T, 1, 2))
    a = align(base, source)
    assert a.source_of.tolist() == [0, 1, 2, -1, -1, 2]  # flips 3, 4: none; answer: answer
    assert a.unaligned == (3, 4)
    assert a.evidence.tolist() == [False, True, True, True, True, True]
    mask = a.evidence & (a.source_of >= 0)  # the patch's evidence set
    assert mask.tolist() == [False, True, True, False, False, True]


def test_segments_are_named_by_role_and_what_follows() -> None:
    codes = (T, T, 1, T, 2, 2, SUMMARY, T, Q, T)
    assert [(name, a, b) for name, a, b in segments(codes)] == [
        ((1, 0, 1), 0, 2), ((1, 0, 0), 2, 3), ((2, 0, 1), 3, 4), ((2, 0, 0), 4, 6),
        ((SUMMARY, 0, 0), 6, 7), ((Q, 0, 1), 7, 8), ((Q, 0, 0), 8, 9), ((T, -1, 1), 9, 10)]


def test_readouts_without_spans_align_only_equal_tokens() -> None:
    a = align(readout((1, 2, 3, 4), ()), readout((1, 7, 3, 4), ()))
    assert a.source_of.tolist() == [0, -1, -1, 3] or a.source_of.tolist() == [0, -1, 2, 3]
    assert 1 in a.unaligned and not a.evidence.any()


def _same_roles(base: TokenizedQuery, source: TokenizedQuery, source_of: list[int]) -> None:
    """Every aligned position pairs the same role, and template and question tokens are equal."""
    for p, s in enumerate(source_of):
        if s < 0 or p == len(base.context_ids) - 1:
            continue
        assert base.spans[p] == source.spans[s], (p, s)
        if base.spans[p] in (T, Q):
            assert base.context_ids[p] == source.context_ids[s], (p, s)


def test_a_multi_turn_recommender_pair_aligns_turn_by_turn(smol_tokenizer: Any) -> None:
    """Two recommender episodes about one target movie, multi-turn, rendered by the real
    tokenizer. At one turn (different ratings): every position pairs the same role, turn t's
    rating with turn t's. Turn 3 against turn 2 (contexts of different lengths): what only the
    base has, turn 3's message, is listed; everything else pairs by role."""
    env = envs.get("recommender", turns=3, delivery="multi-turn", titles="explicit")
    eps = list(env.episodes(12, seed=1))
    bos = bos_policy(smol_tokenizer)
    mate = next(i for i in range(1, 12) if eps[i].truth["target"] == eps[0].truth["target"]
                and eps[i].truth["ratings"] != eps[0].truth["ratings"])

    def at(i: int, turn: int) -> TokenizedQuery:
        return render(smol_tokenizer, eps[i].turns[turn].probes[0].queries[0], bos=bos)

    base, source = at(0, 3), at(mate, 3)
    assert len(base.spans) == len(base.context_ids) and set(base.spans) >= {1, 2, 3, Q, T}
    a = align(base, source)
    _same_roles(base, source, a.source_of.tolist())
    assert a.unaligned == ()
    differ = [p for p in range(len(base.context_ids))
              if base.context_ids[p] != source.context_ids[a.source_of[p]]]
    assert differ and all(base.spans[p] in (1, 2, 3) for p in differ)  # ratings only

    shorter = at(mate, 2)
    a = align(base, shorter)
    _same_roles(base, shorter, a.source_of.tolist())
    unaligned = set(a.unaligned)
    third = [p for p, c in enumerate(base.spans) if c == 3]
    assert set(third) <= unaligned  # turn 3's evidence has no counterpart
    assert all(base.spans[p] in (3, T) for p in unaligned)
    assert all(min(third) - 20 < p < max(third) + 20 for p in unaligned)  # its message only
    for t in (1, 2, Q):
        assert all(a.source_of[p] >= 0 for p, c in enumerate(base.spans) if c == t), t
