"""Aligning two read-outs' positions by role, for patching contexts of different lengths.

Two read-outs of one probe differ in their evidence; where it changes length (a multi-digit
count, a generated reply, another number of turns' text) position ``p`` of one is not
position ``p`` of the other. The alignment maps each context position of the base to the
source position with the same role:

- the **shared template**: the blocks of tokens both contexts hold, in order (the longest
  matching blocks, ``difflib.SequenceMatcher`` without its junk heuristic), position by
  position; the answer position (the last context token) is the last of them;
- the **evidence spans**: each stretch between two template blocks (one per turn whose
  evidence differs) is aligned from its end, so that the tokens just before the next template
  block meet; a base token with no source token left in its span has **no counterpart**;
- the options' continuation tokens after the answer position, token by token.

Read-outs of equal context length align position by position (the span of each differing
token is that token). A pair cannot be aligned when the options differ or the last context
tokens differ (the answer position has no counterpart).
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np
from numpy.typing import NDArray

from belieflens.readouts.render import TokenizedQuery


@dataclass(frozen=True, eq=False)
class Alignment:
    """Where each base context position's counterpart is in the source."""

    source_of: NDArray[np.int64]
    """``[base context position]``: the source position of the same role, -1 where none."""
    evidence: NDArray[np.bool_]
    """``[base context position]``: inside an evidence span (a token the two contexts do not
    share)."""

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


def align(base: TokenizedQuery, source: TokenizedQuery) -> Alignment:
    """The role alignment of two read-outs (module docstring); :func:`why_unaligned` must be
    empty.

    Examples:
        >>> q = lambda ids: TokenizedQuery(ids, ((9,),), (0,), "")
        >>> a = align(q((1, 2, 5, 3, 4)), q((1, 2, 6, 7, 3, 4)))
        >>> a.source_of.tolist(), a.unaligned, a.evidence.tolist()
        ([0, 1, 3, 4, 5], (), [False, False, True, False, False])
        >>> align(q((1, 5, 6, 3)), q((1, 7, 3))).source_of.tolist()
        [0, -1, 1, 2]
    """
    b, s = base.context_ids, source.context_ids
    src = np.full(len(b), -1, dtype=np.int64)
    if len(b) == len(s):
        src[:] = np.arange(len(b))
        return Alignment(src, np.asarray(b) != np.asarray(s))
    evidence = np.zeros(len(b), dtype=bool)
    matcher = SequenceMatcher(None, b, s, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            src[i1:i2] = np.arange(j1, j2)
            continue
        evidence[i1:i2] = True
        n = min(i2 - i1, j2 - j1)  # aligned from the span's end
        if n:
            src[i2 - n : i2] = np.arange(j2 - n, j2)
    src[len(b) - 1] = len(s) - 1
    return Alignment(src, evidence)
