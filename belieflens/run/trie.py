"""The token radix tree of a set of forward rows, and a batched schedule over it.

A study's forward rows share most of their tokens: the rotations of a question
share the conversation, the probes of a turn share it too, and turn t+1's
conversation extends turn t's. In the radix tree of the rows every shared token
is one node edge, so running each edge once, against the key/value cache of its
parent, computes exactly the unique tokens of the study.

The edges are packed into rows (:func:`pack`): edges that descend from one
parent, laid out one after another, which a tree mask keeps apart. Rows whose
parents are computed are run together in padded batches (:func:`schedule_rows`):
level by level, each level sorted by length and cut under a row and token budget
(:func:`schedule` is the same for one edge per row). This module is pure (no
torch); :mod:`belieflens.run.trie_runner` executes a schedule.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Edge:
    """One node of the radix tree: the tokens at positions ``start .. start+len(tokens)``.

    Attributes:
        index: position of this edge in :attr:`Trie.edges`.
        parent: index of the parent edge, or -1 for an edge at the root.
        start: number of tokens before this edge (the parent's prefix length).
        tokens: the edge's own tokens.
        children: indices of the child edges.
    """

    index: int
    parent: int
    start: int
    tokens: tuple[int, ...]
    children: tuple[int, ...]

    @property
    def end(self) -> int:
        """Prefix length at the end of this edge."""
        return self.start + len(self.tokens)


@dataclass(frozen=True)
class Trie:
    """The radix tree of a set of token sequences.

    Attributes:
        edges: every edge, parents before children.
        ends: for each input sequence, the edge it ends on (sequences end on edge ends).
    """

    edges: tuple[Edge, ...]
    ends: tuple[int, ...]

    @property
    def tokens(self) -> int:
        """Unique tokens: the sum of all edge lengths."""
        return sum(len(e.tokens) for e in self.edges)

    def locate(self, seq: int, pos: int) -> tuple[int, int]:
        """``(edge, offset)`` of token ``pos`` of input sequence ``seq``."""
        e = self.edges[self.ends[seq]]
        if not 0 <= pos < e.end:
            raise IndexError(f"position {pos} is outside sequence {seq} of length {e.end}")
        while pos < e.start:
            e = self.edges[e.parent]
        return e.index, pos - e.start


class _Node:
    __slots__ = ("children", "end", "parent", "seq", "start")

    def __init__(self, seq: int, start: int, end: int, parent: _Node | None) -> None:
        self.seq, self.start, self.end, self.parent = seq, start, end, parent
        self.children: list[_Node] = []


def build(seqs: Sequence[tuple[int, ...]]) -> Trie:
    """Build the radix tree of ``seqs`` (non-empty sequences; duplicates share an end)."""
    if any(len(s) == 0 for s in seqs):
        raise ValueError("every sequence needs at least one token")
    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    end_node: list[_Node | None] = [None] * len(seqs)
    roots: list[_Node] = []
    path: list[_Node] = []  # edges of the previous sequence, root first
    prev: tuple[int, ...] = ()
    for i in order:
        s = seqs[i]
        if s == prev and path:
            end_node[i] = path[-1]
            continue
        lcp = 0
        n = min(len(s), len(prev))
        while lcp < n and s[lcp] == prev[lcp]:
            lcp += 1
        while path and path[-1].start >= lcp:
            path.pop()
        if path and path[-1].end > lcp:  # split the edge that holds the branch point
            low = path.pop()
            up = _Node(low.seq, low.start, lcp, low.parent)
            siblings = low.parent.children if low.parent is not None else roots
            siblings[siblings.index(low)] = up
            low.start, low.parent = lcp, up
            up.children.append(low)
            path.append(up)
        parent = path[-1] if path else None
        node = _Node(i, lcp, len(s), parent)
        (parent.children if parent is not None else roots).append(node)
        path.append(node)
        end_node[i] = node
        prev = s
    flat: list[_Node] = []
    index: dict[int, int] = {}
    queue = list(roots)
    while queue:  # breadth first: parents get lower indices than children
        nxt: list[_Node] = []
        for node in queue:
            index[id(node)] = len(flat)
            flat.append(node)
            nxt.extend(node.children)
        queue = nxt
    edges = tuple(
        Edge(
            index=k,
            parent=-1 if node.parent is None else index[id(node.parent)],
            start=node.start,
            tokens=tuple(seqs[node.seq][node.start : node.end]),
            children=tuple(index[id(c)] for c in node.children),
        )
        for k, node in enumerate(flat)
    )
    ends = tuple(index[id(n)] for n in end_node if n is not None)
    return Trie(edges=edges, ends=ends)


def levels(trie: Trie) -> list[list[int]]:
    """Edges grouped by depth in the tree: every parent is in an earlier level."""
    out: list[list[int]] = []
    cur = [e.index for e in trie.edges if e.parent == -1]
    while cur:
        out.append(cur)
        cur = [c for i in cur for c in trie.edges[i].children]
    return out


@dataclass(frozen=True)
class Row:
    """Edges run together in one row of a forward call, against one parent's cache.

    Every edge's parent is either the row's parent (a top-level edge of the row) or
    an edge before it in the row. In the row the edges are laid out one after
    another; a tree mask lets each token see its own prefix only (the parent's
    cache, its ancestors' tokens in the row and its own earlier tokens).

    Attributes:
        edges: the edges, each after its parent.
        cols: the column of each edge's first token in the row.
        length: tokens in the row.
    """

    edges: tuple[int, ...]
    cols: tuple[int, ...]
    length: int

    @property
    def root(self) -> int:
        """A top-level edge: its parent's cache (the row's past) and start are the row's."""
        return self.edges[0]


def subtree_tokens(trie: Trie) -> list[int]:
    """Tokens in each edge's subtree (the edge included)."""
    size = [len(e.tokens) for e in trie.edges]
    for e in reversed(trie.edges):  # children come after their parents
        if e.parent >= 0:
            size[e.parent] += size[e.index]
    return size


def pack(trie: Trie, row_tokens: int) -> list[Row]:
    """Cut the tree into rows of at most ``row_tokens`` tokens (an edge longer runs alone).

    A subtree that fits a row is *small*; the edges above them form the tree's
    upper part. Small sibling subtrees are packed whole, largest first, into the
    fewest rows (first-fit decreasing). A large subtree starts a row of its own
    edge, which takes the upper edges below it breadth first while they fit, then
    the small subtrees hanging off its edges, largest first, while they fit. What
    finds no room is placed the same way, by parent, in rows of a later call: so
    the upper part takes few levels of rows, and the small subtrees one more.
    With ``row_tokens`` 0 every edge is a row of its own.
    """
    size = subtree_tokens(trie)
    rows: list[Row] = []

    def whole(c: int, into: list[int]) -> None:
        stack = [c]
        while stack:  # depth first: parents before children
            i = stack.pop()
            into.append(i)
            stack.extend(reversed(trie.edges[i].children))

    def grow(root: int, left: dict[int, list[int]]) -> list[int]:
        edges, total = [root], len(trie.edges[root].tokens)
        below, small = deque(trie.edges[root].children), []
        while below:  # the upper edges, breadth first
            c = below.popleft()
            if size[c] <= row_tokens:
                small.append(c)
            elif total + len(trie.edges[c].tokens) <= row_tokens:
                edges.append(c)
                total += len(trie.edges[c].tokens)
                below.extend(trie.edges[c].children)
            else:
                left.setdefault(trie.edges[c].parent, []).append(c)
        for c in sorted(small, key=lambda i: (-size[i], i)):
            if total + size[c] <= row_tokens:
                whole(c, edges)
                total += size[c]
            else:
                left.setdefault(trie.edges[c].parent, []).append(c)
        return edges

    todo: deque[list[int]] = deque([[e.index for e in trie.edges if e.parent == -1]])
    while todo:
        kids = sorted(todo.popleft(), key=lambda i: (-size[i], i))
        left: dict[int, list[int]] = {}
        bins: list[tuple[list[int], int]] = []  # (edges, tokens) of this group's small rows
        placed: list[list[int]] = []
        for c in kids:
            if size[c] > row_tokens:
                placed.append(grow(c, left))
                continue
            for k, (edges, total) in enumerate(bins):
                if total + size[c] <= row_tokens:
                    whole(c, edges)
                    bins[k] = (edges, total + size[c])
                    break
            else:
                edges = []
                whole(c, edges)
                bins.append((edges, size[c]))
        for edges in placed + [b for b, _ in bins]:
            cols, col = [], 0
            for i in edges:
                cols.append(col)
                col += len(trie.edges[i].tokens)
            rows.append(Row(edges=tuple(edges), cols=tuple(cols), length=col))
        todo.extend(left.values())
    return rows


def schedule_rows(
    trie: Trie, rows: Sequence[Row], *, max_rows: int, max_tokens: int, call_tokens: int = 60
) -> list[list[int]]:
    """Calls of rows (indices into ``rows``), each row after the row of its root's parent.

    Rows are grouped in levels (a row one level below the row holding its root's
    parent), and each level, sorted by length, is cut as in :func:`schedule`.
    """
    row_of = {e: r for r, row in enumerate(rows) for e in row.edges}
    level: list[int] = []
    for row in rows:  # a parent's row is listed before its children's rows
        parent = trie.edges[row.root].parent
        level.append(0 if parent < 0 else level[row_of[parent]] + 1)
    by_level: list[list[int]] = [[] for _ in range(max(level, default=-1) + 1)]
    for r, lv in enumerate(level):
        by_level[lv].append(r)
    calls: list[list[int]] = []
    for group in by_level:
        group.sort(key=lambda r: (rows[r].length, trie.edges[rows[r].root].start, r))
        cuts = _partition([rows[r].length for r in group],
                          [trie.edges[rows[r].root].start for r in group],
                          max_rows, max_tokens, call_tokens)
        calls.extend([group[i] for i in cut] for cut in cuts)
    return calls


def schedule(
    trie: Trie, *, max_rows: int, max_tokens: int, call_tokens: int = 60
) -> list[list[int]]:
    """Batches of edges, in an order where each edge's parent ran in an earlier batch.

    Each level of the tree is sorted by edge length and cut into batches that
    minimise the padded tokens plus ``call_tokens`` per forward call (the fixed
    cost of one call, in tokens: a calibration for the 135M default model on CPU). A
    batch keeps
    within ``max_rows`` rows and a padded size, rows times (longest prefix +
    longest edge), of ``max_tokens``; an edge over budget on its own runs alone.
    """
    rows = pack(trie, 0)  # one edge per row: the row levels are the tree's levels
    calls = schedule_rows(trie, rows, max_rows=max_rows, max_tokens=max_tokens,
                          call_tokens=call_tokens)
    return [[rows[r].root for r in call] for call in calls]


def _partition(
    lengths: list[int], starts: list[int], max_rows: int, max_tokens: int, call_tokens: int
) -> list[list[int]]:
    """Optimal cut of items sorted by length into contiguous batches (dynamic programming).

    Returns positions into ``lengths``; ``starts`` are the items' past lengths.
    """
    n = len(lengths)
    best = [0.0] + [float("inf")] * n  # best[j]: cost of the first j items
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        width = lengths[j - 1]  # the longest of any batch ending at j
        past = 0
        for i in range(j - 1, max(-1, j - 1 - max_rows), -1):  # batch [i, j)
            past = max(past, starts[i])
            rows = j - i
            if rows > 1 and rows * (past + width) > max_tokens:
                break
            cost = best[i] + call_tokens + rows * width
            if cost < best[j]:
                best[j], cut[j] = cost, i
    out: list[list[int]] = []
    j = n
    while j > 0:
        out.append(list(range(cut[j], j)))
        j = cut[j]
    return out[::-1]
