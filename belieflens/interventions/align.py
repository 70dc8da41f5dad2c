"""Aligning two read-outs' positions by the episode's own spans, for patching.

Two read-outs of one probe differ in their evidence; where it changes length (a multi-digit
count, another number of flips, a generated reply) position ``p`` of one is not position ``p``
of the other, and where it does not, a token of the template may still sit where the other
holds evidence. The renderer records the role of every context token
(:attr:`~belieflens.readouts.render.TokenizedQuery.spans`: turn ``t``'s evidence, a summary of
the evidence, the question, or the template), and the alignment pairs positions by those
roles only, never by token identity alone:

- the context is cut into **segments**: each maximal run of tokens of one marked role (the
  ``k``-th run of that role), and each run of template tokens, named by the marked segment
  that follows it (the template before turn 3's evidence, before the question, ...; the last
  one by the end);
- a segment pairs with the source's segment of the same name; inside it, segments of equal
  length align position by position when they are evidence (the same role at the same offset),
  and template or question segments where their tokens are equal; otherwise the tokens the two
  share at the segment's start and at its end align, and the rest have **no counterpart**;
- the answer position (the last context token) always aligns with the source's answer position,
  and the options' continuation tokens after it, token by token;
- positions with no counterpart (a segment the source does not have: turn 5's evidence against
  a source with two turns; the middle of segments of different lengths) are listed and never
  patched.

Read-outs without spans (files written before the renderer recorded them) are all template:
their equal tokens align, the differing ones are listed. A pair cannot be aligned when the
options differ or the last context tokens differ (the answer position has no counterpart).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from belieflens.readouts.render import QUESTION, SUMMARY, TEMPLATE, TokenizedQuery

Segment = tuple[tuple[int, int, int], int, int]
"""A segment's name ``(code, occurrence, kind)`` (kind 0: marked, 1: the template before the
marked segment ``(code, occurrence)``), its first position and its end."""


@dataclass(frozen=True, eq=False)
class Alignment:
    """Where each base context position's counterpart is in the source."""

    source_of: NDArray[np.int64]
    """``[base context position]``: the source position of the same role, -1 where none."""
    evidence: NDArray[np.bool_]
    """``[base context position]``: a token of evidence (a turn's or a summary)."""

    @property
    def unaligned(self) -> tuple[int, ...]:
        """The base context positions with no counterpart."""
        return tuple(int(p) for p in np.flatnonzero(self.source_of < 0))

    def row_map(self, base_len: int, source_ctx: int, width: int) -> NDArray[np.int64]:
        """The source position of each base row position ``[width]`` (a row of ``base_len``
        tokens: context, then continuation tokens; -1 past it or without a counterpart)."""
        out = np.full(width, -1, dtype=np.int64)
        ctx = self.source_of.size
        out[: min(ctx, base_len)] = self.source_of[:base_len]
        tail = np.arange(ctx, base_len)
        out[tail] = source_ctx + (tail - ctx)
        return out


def why_unaligned(base: TokenizedQuery, source: TokenizedQuery) -> str:
    """Why two read-outs cannot be aligned by role, or ``''``."""
    if base.option_ids != source.option_ids:
        return "their option continuations differ"
    if not base.context_ids or not source.context_ids:
        return "a context is empty"
    if base.context_ids[-1] != source.context_ids[-1]:
        return "their answer positions hold different tokens (no shared template ends them)"
    return ""


def roles(query: TokenizedQuery) -> tuple[int, ...]:
    """The role code of each context token (all template where the read-out has none)."""
    n = len(query.context_ids)
    return query.spans if len(query.spans) == n else (TEMPLATE,) * n


def segments(codes: Sequence[int]) -> list[Segment]:
    """The segments of a context's role codes (module docstring), in order."""
    runs: list[tuple[int, int, int]] = []  # (code, start, end)
    for p, c in enumerate(codes):
        if runs and runs[-1][0] == c:
            runs[-1] = (c, runs[-1][1], p + 1)
        else:
            runs.append((c, p, p + 1))
    seen: dict[int, int] = {}
    named: list[tuple[tuple[int, int], int, int, int]] = []  # (code, occurrence), start, end, c
    for c, a, b in runs:
        if c != TEMPLATE:
            seen[c] = seen.get(c, -1) + 1
            named.append(((c, seen[c]), a, b, c))
        else:
            named.append(((TEMPLATE, -1), a, b, c))
    out: list[Segment] = []
    following: tuple[int, int] = (TEMPLATE, -1)  # the end
    for key, a, b, c in reversed(named):
        if c == TEMPLATE:
            out.append(((following[0], following[1], 1), a, b))
        else:
            out.append(((key[0], key[1], 0), a, b))
            following = key
    return out[::-1]


def _pair(b_ids: Sequence[int], s_ids: Sequence[int], evidence: bool) -> list[tuple[int, int]]:
    """Offsets ``(base, source)`` that align inside two segments of one name."""
    n, m = len(b_ids), len(s_ids)
    if n == m and (evidence or list(b_ids) == list(s_ids)):
        return [(i, i) for i in range(n)]
    head = 0
    while head < min(n, m) and b_ids[head] == s_ids[head]:
        head += 1
    tail = 0
    while tail < min(n, m) - head and b_ids[n - 1 - tail] == s_ids[m - 1 - tail]:
        tail += 1
    return [(i, i) for i in range(head)] + [(n - 1 - k, m - 1 - k) for k in range(tail)]


def align(base: TokenizedQuery, source: TokenizedQuery) -> Alignment:
    """The role alignment of two read-outs (module docstring); :func:`why_unaligned` must be
    empty.

    Examples:
        >>> T, Q = TEMPLATE, QUESTION
        >>> q = lambda ids, sp: TokenizedQuery(ids, ((9,),), (0,), "", sp)
        >>> # "rolled 1 2 and 3 ?" against "rolled 1 and 3 4 ?": evidence of turns 1..3
        >>> a = align(q((5, 1, 2, 7, 3, 8), (T, 1, 2, T, 3, Q)),
        ...           q((5, 1, 7, 3, 4, 8), (T, 1, T, 2, 3, Q)))
        >>> a.source_of.tolist(), a.unaligned
        ([0, 1, 3, -1, 4, 5], (3,))
    """
    b_codes, s_codes = roles(base), roles(source)
    src = np.full(len(base.context_ids), -1, dtype=np.int64)
    theirs = {name: (a, b) for name, a, b in segments(s_codes)}
    for name, a, b in segments(b_codes):
        if name not in theirs:
            continue
        sa, sb = theirs[name]
        marked = name[2] == 0 and name[0] not in (TEMPLATE, QUESTION)
        for i, j in _pair(base.context_ids[a:b], source.context_ids[sa:sb], marked):
            src[a + i] = sa + j
    src[len(src) - 1] = len(source.context_ids) - 1
    codes = np.asarray(b_codes, dtype=np.int64)
    return Alignment(src, (codes >= 1) | (codes == SUMMARY))
