"""The stated posterior of ProteinWorld (From Prompts to Posteriors, App. F.3.2).

"At iteration k, the LLM is given the entire world setup ... as well as a prior p_0 over Θ
as system prompt ... It is then given the full history of experiments and results
(h_1, ..., h_k), and asked to output the posterior probability distribution across Θ,
recorded as verbalized probabilities, sampled at temperature τ = 1.0." The template itself
gives the prior as the user's turn ("User: You can assume that initially, this probability
distribution over the protein classes held: ..."), and so does this module: the world in the
system prompt, the prior, the history and the request in the user's. A reply that does not
fit the format is, under the paper's policy (``unparsed=retry``), generated twice more with
the same prompt and another seed; under ``unparsed=count`` it is not retried. A reply that
still does not parse is counted (``stated_valid_k`` = 0, its probabilities NaN), never
dropped: the report gives the parsed share beside the KL of the parsed ones.

The format is one line ``Class: probability`` per class (the paper prefills ``θ_1:`` for a
model that strays from it). A reply parses when it names every class once with a number in
[0, 1] (or a percentage) and the numbers sum to more than 0; the stated distribution is the
numbers normalised to sum to 1, and their raw sum is kept (``stated_sum_k``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from belieflens.episodes.base import Message
from belieflens.episodes.generation import TextGenerator, derive_seed

SYSTEM = "You are an expert in the following fictional protein world:"
"""The start of the system prompt (App. F.3.2); the world's description follows."""

ASK = (
    "Based on the prior and all experiment results so far, state your posterior probability "
    "distribution over the protein classes. Answer with one line per class in the format "
    "'Class: probability', the probabilities summing to 1, and nothing else."
)
"""The request after the history of results."""

TEMPERATURE = 1.0
"""App. F.3.2: "sampled at temperature τ = 1.0"."""

ATTEMPTS = {"retry": 3, "count": 1}
"""Generations per read-out under each ``unparsed`` policy (App. F.3.2: "generation is
attempted twice more using the same prompts and a different seed")."""

_KEY = 7919
"""Seed key of the stated read-out (apart from the model's experiment choices)."""

_LINE = re.compile(r"^\W*(?P<name>[^:=\n]+?)\W*[:=]\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<pct>%?)",
                   re.M)

_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
"""A list marker before a class name (``- ``, ``1. ``)."""


@dataclass(frozen=True)
class Stated:
    """One stated read-out: the normalised probabilities (``None`` when no reply parsed),
    their raw sum, the replies generated (the last one parsed if any)."""

    probs: tuple[float, ...] | None
    raw_sum: float
    replies: tuple[str, ...]


def stated_messages(world: str, prior: str, results: Sequence[str]) -> tuple[Message, ...]:
    """The system prompt (:data:`SYSTEM`, then the ``world``'s description) and the user turn:
    the ``prior`` ("You can assume that initially, this probability distribution over the
    protein classes held: ...", which App. F.3.2's template gives as the user's words), the
    history, then :data:`ASK`."""
    history = "\n".join(results) if results else "No experiments yet."
    return (Message("system", f"{SYSTEM}\n\n{world}"),
            Message("user", f"{prior}\n\n{history}\n\n{ASK}"))


def parse_stated(text: str, classes: Sequence[str]) -> tuple[tuple[float, ...], float] | None:
    """The distribution ``text`` states over ``classes`` (normalised) and its raw sum, or
    ``None`` when it does not fit the format (module docstring).

    Examples:
        >>> parse_stated("Vorin: 0.6\\nDase: 0.2\\nKulin: 0.2", ("Vorin", "Dase", "Kulin"))
        ((0.6, 0.2, 0.2), 1.0)
        >>> parse_stated("Vorin: 30%\\nDase: 30%", ("Vorin", "Dase", "Kulin")) is None
        True
    """
    index = {c.casefold(): i for i, c in enumerate(classes)}
    found: dict[int, float] = {}
    for m in _LINE.finditer(text):
        name = _MARKER.sub("", m["name"]).strip().strip("*_`\"'")
        i = index.get(name.casefold())
        if i is None:
            continue
        value = float(m["num"]) / (100.0 if m["pct"] else 1.0)
        if i in found or not 0.0 <= value <= 1.0:
            return None
        found[i] = value
    if len(found) != len(classes):
        return None
    total = math.fsum(found.values())
    if total <= 0:
        return None
    return tuple(found[i] / total for i in range(len(classes))), total


def stated_posterior(gen: TextGenerator, world: str, prior: str, results: Sequence[str],
                     classes: Sequence[str], *, seed: int, turn: int, policy: str,
                     max_new_tokens: int) -> Stated:
    """Sample the stated posterior after ``results`` at τ = 1.0 (:func:`stated_messages`):
    attempt ``a`` uses seed ``derive_seed(seed, 7919, turn, a)``; up to :data:`ATTEMPTS`
    ``[policy]`` attempts."""
    messages = stated_messages(world, prior, results)
    replies: list[str] = []
    for attempt in range(ATTEMPTS[policy]):
        text = gen(messages, seed=derive_seed(seed, _KEY, turn, attempt),
                   max_new_tokens=max_new_tokens, temperature=TEMPERATURE)
        replies.append(text)
        parsed = parse_stated(text, classes)
        if parsed is not None:
            return Stated(parsed[0], parsed[1], tuple(replies))
    return Stated(None, float("nan"), tuple(replies))
