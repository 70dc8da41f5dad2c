"""What Bayesian teaching trains on: an environment's read-outs as token trees with targets.

Every read-out that ``extract`` renders (each belief question, each Latin-square rotation,
each delivery) is rendered here with the same code (:func:`belieflens.readouts.render.render`),
so the answer position trained is the one extraction reads. The read-outs of one
``(episode, delivery, turn)`` share their conversation; they are laid out as one token
radix tree (:mod:`belieflens.run.trie`): every shared token once, each token at its true
position, and an ancestor mask that lets a token see exactly its own prefix. One forward of
the tree reads every read-out of the group.

The target of a read-out is the oracle (or a tempered oracle,
:class:`~belieflens.episodes.capabilities.Temperable`) over its outcomes, laid out in the
rotation's position order: the option at position ``j`` shows outcome ``outcome[j]``, so its
target is ``oracle[outcome[j]]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from belieflens.episodes.base import Environment
from belieflens.errors import ParameterError
from belieflens.readouts.render import TokenizedQuery, bos_policy, prompt_key, render
from belieflens.run.extract import QueryRecord, records
from belieflens.run.rows import forward_rows
from belieflens.run.trie import Trie, build


@dataclass(frozen=True)
class Tree:
    """The read-outs of one ``(episode, delivery, turn)`` as one masked token sequence.

    Attributes:
        ids: the tree's unique tokens, each edge after its parent ``[token]``.
        positions: each token's position in its own prompt ``[token]``.
        edge: each token's edge of the radix tree ``[token]``.
        ancestors: ``ancestors[a, b]``: edge ``b`` is ``a`` or one of its ancestors.
        reads: positions (indices into ``ids``) whose next-token distribution is read.
        option_read: ``[readout, option, cont_token]`` index into ``reads`` of each option
            token's predicting position (-1: padding).
        option_token: ``[readout, option, cont_token]`` the option's token ids (0: padding).
        target: ``[readout, option]`` the target probability of each position (0 past the
            read-out's options).
        n_options: ``[readout]`` how many options each read-out has.
        question: ``[readout]`` each read-out's belief question (probe), numbered in the
            order they first appear in the tree.
        outcome: ``[readout, option]`` the outcome each option position shows (-1 past the
            read-out's options): its rotation.
        key: ``(episode, delivery, turn)``.
        condition: the taught condition the episode belongs to (its index in a mix).
    """

    ids: np.ndarray
    positions: np.ndarray
    edge: np.ndarray
    ancestors: np.ndarray
    reads: np.ndarray
    option_read: np.ndarray
    option_token: np.ndarray
    target: np.ndarray
    n_options: np.ndarray
    question: np.ndarray
    outcome: np.ndarray
    key: tuple[int, str, int]
    condition: int = 0

    @property
    def tokens(self) -> int:
        """Tokens the tree runs."""
        return int(self.ids.size)

    @property
    def readouts(self) -> int:
        """Read-outs the tree trains."""
        return int(self.n_options.size)

    def weights(self, weigh: str) -> np.ndarray:
        """``[readout]`` each read-out's weight in the loss: 1 (``readout``), or with
        ``question`` one over its question's read-outs in the tree, so that each belief
        question weighs the same however many rotations render it."""
        if weigh == "readout":
            return np.ones(self.readouts)
        counts = np.bincount(self.question)
        out: np.ndarray = 1.0 / counts[self.question]
        return out

    def mask(self) -> np.ndarray:
        """``[token, token]`` bool: token ``i`` may attend to token ``j`` (its own prefix)."""
        allowed = np.asarray(self.ancestors[self.edge[:, None], self.edge[None, :]], dtype=bool)
        out: np.ndarray = allowed & np.tri(self.tokens, dtype=bool)
        return out


def predecessors(trees: Sequence[Tree]) -> np.ndarray:
    """``[tree]`` the index of each tree's predecessor, the tree of the same condition,
    episode and delivery one turn earlier whose read-outs are the same questions under the same
    rotations in the same order, or -1 (the first turn, or read-outs that do not line up): the
    pairs whose turn-to-turn step a step loss compares with the target's.

    Examples:
        >>> z = np.zeros((1, 1), dtype=np.int64)
        >>> first, second = (Tree(*(z,) * 11, key=(0, "multi-turn", turn)) for turn in (0, 1))
        >>> predecessors([first, second]).tolist()
        [-1, 0]
    """
    at = {(t.condition, *t.key): i for i, t in enumerate(trees)}
    out = np.full(len(trees), -1, dtype=np.int64)
    for i, t in enumerate(trees):
        episode, delivery, turn = t.key
        j = at.get((t.condition, episode, delivery, turn - 1))
        if j is not None and np.array_equal(trees[j].question, t.question) and \
                np.array_equal(trees[j].outcome, t.outcome):
            out[i] = j
    return out


def target_on_positions(oracle: Sequence[float], outcome: Sequence[int]) -> np.ndarray:
    """The oracle over outcomes laid out on option positions (``oracle[outcome[j]]``),
    renormalised (a rotation shows every outcome once, so this only removes rounding)."""
    t = np.asarray([float(oracle[o]) for o in outcome], dtype=np.float64)
    out: np.ndarray = t / t.sum()
    return out


def _ancestors(trie: Trie) -> np.ndarray:
    n = len(trie.edges)
    anc = np.zeros((n, n), dtype=bool)
    for e in trie.edges:  # parents come before children
        if e.parent >= 0:
            anc[e.index] = anc[e.parent]
        anc[e.index, e.index] = True
    return anc


def build_tree(recs: Sequence[QueryRecord], tqs: Sequence[TokenizedQuery]) -> Tree:
    """The tree of read-outs ``recs`` rendered as ``tqs`` (one group: every record has an
    oracle)."""
    rows = forward_rows(tqs)
    trie = build([r.ids for r in rows])
    start = np.cumsum([0] + [len(e.tokens) for e in trie.edges])
    ids = np.concatenate([np.asarray(e.tokens, dtype=np.int64) for e in trie.edges])
    positions = np.concatenate([np.arange(e.start, e.end, dtype=np.int64) for e in trie.edges])
    edge = np.concatenate([np.full(len(e.tokens), e.index, dtype=np.int64) for e in trie.edges])
    k_max = max(len(tq.option_ids) for tq in tqs)
    l_max = max(len(c) for tq in tqs for c in tq.option_ids)
    option_read = np.full((len(tqs), k_max, l_max), -1, dtype=np.int64)
    option_token = np.zeros((len(tqs), k_max, l_max), dtype=np.int64)
    target = np.zeros((len(tqs), k_max), dtype=np.float64)
    outcome = np.full((len(tqs), k_max), -1, dtype=np.int64)
    reads: dict[int, int] = {}

    def read(ri: int, pos: int) -> int:
        e, off = trie.locate(ri, pos)
        return reads.setdefault(int(start[e]) + off, len(reads))

    for ri, r in enumerate(rows):
        tq = tqs[r.query]
        for j, cont in enumerate(tq.option_ids):
            if r.option is None:  # single-token options: one row reads them all
                option_read[r.query, j, 0] = read(ri, r.answer_pos)
                option_token[r.query, j, 0] = cont[0]
            elif r.option == j:
                for i, tok in enumerate(cont):
                    option_read[r.query, j, i] = read(ri, r.answer_pos + i)
                    option_token[r.query, j, i] = tok
    for q, (rec, tq) in enumerate(zip(recs, tqs, strict=True)):
        assert rec.oracle is not None
        target[q, : len(tq.outcome)] = target_on_positions(rec.oracle, tq.outcome)
        outcome[q, : len(tq.outcome)] = tq.outcome
    first = recs[0]
    order = list(dict.fromkeys(r.probe for r in recs))
    return Tree(
        ids=ids, positions=positions, edge=edge, ancestors=_ancestors(trie),
        reads=np.asarray(sorted(reads, key=reads.__getitem__), dtype=np.int64),
        option_read=option_read, option_token=option_token, target=target,
        n_options=np.asarray([len(tq.option_ids) for tq in tqs], dtype=np.int64),
        question=np.asarray([order.index(r.probe) for r in recs], dtype=np.int64),
        outcome=outcome, key=(first.episode, first.delivery, first.turn),
    )


def taught_records(env: Environment, episodes: int, seed: int) -> list[QueryRecord]:
    """The read-outs of ``episodes`` episodes of ``env`` at ``seed`` that have an oracle; one
    line (:class:`ParameterError`) if none has: the environment cannot be taught."""
    recs = [r for r in records(env, episodes, seed) if r.oracle is not None]
    if not recs:
        raise ParameterError(
            f"environment {getattr(env, 'name', env)!r} has no option-level oracle: teach "
            "needs read-outs whose exact distribution over the options is known"
        )
    bad = [r for r in recs if not np.isfinite(np.asarray(r.oracle, dtype=float)).all()]
    if bad:
        raise ParameterError(f"environment {getattr(env, 'name', env)!r} gave an oracle "
                             "that is not a finite distribution")
    return recs


def groups(recs: Sequence[QueryRecord]) -> Iterator[list[int]]:
    """Indices of ``recs`` grouped by ``(episode, delivery, turn)``, in first-seen order."""
    by: dict[tuple[int, str, int], list[int]] = {}
    for i, r in enumerate(recs):
        by.setdefault((r.episode, r.delivery, r.turn), []).append(i)
    yield from by.values()


def trees(tokenizer: Any, recs: Sequence[QueryRecord]) -> list[Tree]:
    """Every ``(episode, delivery, turn)`` group of ``recs`` as a :class:`Tree`."""
    return taught(tokenizer, recs)[0]


def taught(tokenizer: Any, recs: Sequence[QueryRecord]) -> tuple[list[Tree], set[str]]:
    """:func:`trees` of ``recs`` and the :func:`~belieflens.readouts.render.prompt_key` of
    every read-out's rendered context (what an evaluation of the taught model leaves out)."""
    bos = bos_policy(tokenizer)
    tqs = [render(tokenizer, r.query, bos=bos) for r in recs]
    keys = {prompt_key(tq.context_text) for tq in tqs}
    return [build_tree([recs[i] for i in g], [tqs[i] for i in g]) for g in groups(recs)], keys
