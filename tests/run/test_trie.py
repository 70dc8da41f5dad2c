"""The token radix tree: exact unique tokens, paths, location of positions, schedules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from belieflens.run.trie import Trie, build, levels, pack, schedule, schedule_rows

seqs_st = st.lists(
    st.lists(st.integers(0, 3), min_size=1, max_size=8).map(tuple), min_size=1, max_size=12
)


def _unique_prefixes(seqs: list[tuple[int, ...]]) -> int:
    return len({s[:k] for s in seqs for k in range(1, len(s) + 1)})


def _path(trie: Trie, seq: int) -> tuple[int, ...]:
    e = trie.edges[trie.ends[seq]]
    parts = []
    while True:
        parts.append(e.tokens)
        if e.parent < 0:
            break
        e = trie.edges[e.parent]
    return tuple(t for p in reversed(parts) for t in p)


@given(seqs_st)
@settings(max_examples=300, deadline=None)
def test_tree_holds_exactly_the_unique_tokens_and_every_sequence(
    seqs: list[tuple[int, ...]],
) -> None:
    trie = build(seqs)
    assert trie.tokens == _unique_prefixes(seqs)
    for i, s in enumerate(seqs):
        assert _path(trie, i) == s
        assert trie.edges[trie.ends[i]].end == len(s)
        for pos in range(len(s)):
            k, off = trie.locate(i, pos)
            assert trie.edges[k].tokens[off] == s[pos]
            assert trie.edges[k].start + off == pos
    for e in trie.edges:
        assert e.tokens
        if e.parent >= 0:
            assert e.parent < e.index
            assert trie.edges[e.parent].end == e.start
            assert e.index in trie.edges[e.parent].children
        else:
            assert e.start == 0
        # siblings branch on different first tokens
        firsts = [trie.edges[c].tokens[0] for c in e.children]
        assert len(firsts) == len(set(firsts))


@given(seqs_st, st.integers(1, 5), st.integers(1, 40), st.integers(0, 100))
@settings(max_examples=200, deadline=None)
def test_schedule_runs_every_edge_once_after_its_parent_within_budget(
    seqs: list[tuple[int, ...]], max_rows: int, max_tokens: int, call_tokens: int
) -> None:
    trie = build(seqs)
    batches = schedule(trie, max_rows=max_rows, max_tokens=max_tokens, call_tokens=call_tokens)
    ran: set[int] = set()
    for b in batches:
        assert b
        assert len(b) <= max_rows
        edges = [trie.edges[i] for i in b]
        if len(b) > 1:
            width = max(len(e.tokens) for e in edges) + max(e.start for e in edges)
            assert len(b) * width <= max_tokens
        for e in edges:
            assert e.parent < 0 or e.parent in ran
        ran.update(b)
    assert sorted(ran) == list(range(len(trie.edges)))
    assert sum(len(x) for x in levels(trie)) == len(trie.edges)


@given(seqs_st, st.integers(0, 20), st.integers(1, 5), st.integers(1, 60))
@settings(max_examples=200, deadline=None)
def test_packed_rows_hold_every_edge_once_after_its_parent_within_budget(
    seqs: list[tuple[int, ...]], row_tokens: int, max_rows: int, max_tokens: int
) -> None:
    trie = build(seqs)
    rows = pack(trie, row_tokens)
    seen = [e for r in rows for e in r.edges]
    assert sorted(seen) == list(range(len(trie.edges)))
    for r in rows:
        parent = trie.edges[r.root].parent
        for k, e in enumerate(r.edges):
            edge = trie.edges[e]
            assert edge.parent == parent or edge.parent in r.edges[:k]
            assert r.cols[k] == sum(len(trie.edges[i].tokens) for i in r.edges[:k])
        assert r.length == sum(len(trie.edges[e].tokens) for e in r.edges)
        assert r.length <= row_tokens or len(r.edges) == 1
    if row_tokens == 0:
        assert all(len(r.edges) == 1 for r in rows)
    done: set[int] = set()
    for call in schedule_rows(trie, rows, max_rows=max_rows, max_tokens=max_tokens):
        assert 1 <= len(call) <= max_rows
        if len(call) > 1:
            width = max(rows[i].length for i in call)
            past = max(trie.edges[rows[i].root].start for i in call)
            assert len(call) * (past + width) <= max_tokens
        for i in call:
            parent = trie.edges[rows[i].root].parent
            assert parent < 0 or parent in done
        done.update(e for i in call for e in rows[i].edges)
    assert len(done) == len(trie.edges)


def test_shared_conversation_is_one_edge_and_duplicates_share_an_end() -> None:
    conv = (1, 2, 3, 4)
    seqs = [(*conv, 7, 8), (*conv, 9), (*conv, 7, 8), conv, (*conv, 7)]
    trie = build(seqs)
    assert trie.tokens == 4 + 2 + 1
    assert trie.ends[0] == trie.ends[2]
    assert trie.edges[trie.ends[3]].tokens == conv
    assert trie.edges[trie.ends[4]].end == 5


def test_schedule_keeps_short_and_long_edges_apart_when_padding_costs_more() -> None:
    root = tuple(range(10))
    seqs = [(*root, 100 + i) for i in range(8)] + [
        root + tuple(200 + 50 * i + j for j in range(40)) for i in range(8)
    ]
    trie = build(seqs)
    batches = schedule(trie, max_rows=64, max_tokens=10_000, call_tokens=8)
    lens = [sorted({len(trie.edges[i].tokens) for i in b}) for b in batches]
    assert lens == [[10], [1], [40]]
    merged = schedule(trie, max_rows=64, max_tokens=10_000, call_tokens=10_000)
    assert [len(b) for b in merged] == [1, 16]
