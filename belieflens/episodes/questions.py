"""Belief questions as :class:`~belieflens.episodes.base.Probe` records: multiple-choice questions
asked under every Latin-square rotation, and text-completion questions.

Building a question from text is environment-level work (no tokenizer is involved);
:mod:`belieflens.readouts` turns the resulting queries into token-aligned read-outs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from belieflens.episodes.base import Message, Probe, Query, append_user
from belieflens.episodes.latin import latin_square
from belieflens.types import Delivery, PromptFormat

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""Letters that label MCQ positions."""

DEFAULT_PREFILL = "Answer:"
"""Assistant prefill before the answer letter; options continue it as `` A``, `` B``, ..."""


def mcq_text(question: str, shown: Sequence[str]) -> str:
    """The user-facing text of a multiple-choice question with the labels in ``shown`` order."""
    lines = [question]
    lines += [f"{LETTERS[j]}. {label}" for j, label in enumerate(shown)]
    lines.append("Answer with the letter only.")
    return "\n".join(lines)


def mcq_probe(name: str, context: tuple[Message, ...], question: str, labels: Sequence[str],
              oracle: Sequence[float] | None, delivery: Delivery, *,
              prefill: str = DEFAULT_PREFILL) -> Probe:
    """A multiple-choice probe asked under every rotation of the cyclic Latin square.

    Under rotation ``r`` the letter at position ``j`` stands for outcome ``(r + j) % k``.
    The question is appended as the user's words after ``context`` (marked as the question's
    span) and the answer is read as the letter continuing ``prefill`` in the assistant's
    turn.
    """
    k = len(labels)
    if not 2 <= k <= len(LETTERS):
        raise ValueError(f"an MCQ needs 2..{len(LETTERS)} options, got {k}")
    options = tuple(f" {LETTERS[j]}" for j in range(k))
    return rotated_mcq(
        name, labels, oracle, delivery, options,
        lambda row: (append_user(context, mcq_text(question, [labels[o] for o in row]),
                                 "question"), prefill),
    )


def rotated_mcq(
    name: str,
    labels: Sequence[str],
    oracle: Sequence[float] | None,
    delivery: Delivery,
    options: tuple[str, ...],
    ask: Callable[[tuple[int, ...]], tuple[tuple[Message, ...], str]],
    *,
    format: PromptFormat = "chat",
    order: Callable[[int], int] = int,
) -> Probe:
    """An MCQ probe with one query per rotation of the cyclic Latin square.

    Under rotation ``r`` the option at position ``j`` stands for outcome
    ``order(square[r, j])`` (``row``); ``ask(row)`` gives that query's messages and
    prefill.
    """
    square = latin_square(len(labels))
    queries = []
    for r in range(len(labels)):
        row = tuple(order(int(o)) for o in square[r])
        messages, prefill = ask(row)
        queries.append(
            Query(messages=messages, prefill=prefill, options=options, outcome=row, rotation=r,
                  format=format)
        )
    return Probe(
        name=name,
        labels=tuple(labels),
        oracle=None if oracle is None else tuple(float(x) for x in oracle),
        queries=tuple(queries),
        delivery=delivery,
        kind="mcq",
    )


def completion_probe(name: str, context: tuple[Message, ...], stem: str, labels: Sequence[str],
                     oracle: Sequence[float] | None, delivery: Delivery, *,
                     format: PromptFormat = "chat", continuations: Sequence[str] | None = None,
                     terminator: str = "\n") -> Probe:
    """A revealed-belief probe: the prompt ends right before the outcome, read as text.

    ``stem`` is the assistant prefill (``chat``) or the whole prompt (``raw``);
    each outcome's continuation defaults to its label. There is one rotation: the
    outcomes are not positions, so there is no position bias to cancel.
    """
    conts = tuple(continuations) if continuations is not None else tuple(labels)
    query = Query(
        messages=context,
        prefill=stem,
        options=conts,
        outcome=tuple(range(len(labels))),
        rotation=0,
        format=format,
        terminator=terminator,
    )
    return Probe(
        name=name,
        labels=tuple(labels),
        oracle=None if oracle is None else tuple(float(x) for x in oracle),
        queries=(query,),
        delivery=delivery,
        kind="completion",
    )
