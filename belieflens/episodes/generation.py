"""Model-generated text inside episodes: the generator protocol and its pure logic.

Two parts of an episode may be written by a language model: the assistant's
intervening replies under the ``multi-turn-self`` delivery, and the user's
messages under active engagement, where a simulator rewrites each clean segment
in an assigned style. The model itself is plugged in from outside as a
:class:`TextGenerator`; this module holds what does not need it: seed
derivation, extraction of the ``<message>`` text, and the retry loop that
records a failure instead of ever passing raw simulator output on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from belieflens.episodes.base import Message, Query
from belieflens.episodes.params import bad, check_temperature, int_in

MESSAGE_RE = re.compile(r"<message>(.*?)</message>", re.DOTALL | re.IGNORECASE)
"""The tag that delimits the simulator's message; only its content enters the context."""


class TextGenerator(Protocol):
    """A chat model that continues ``messages`` with one assistant reply, seeded, reproducible."""

    def __call__(
        self,
        messages: tuple[Message, ...],
        *,
        seed: int,
        max_new_tokens: int,
        temperature: float,
    ) -> str:
        """The generated reply text (without the chat template's end-of-turn marker)."""
        ...


@runtime_checkable
class OptionScorer(Protocol):
    """A model that scores read-out queries: the log-probability of each option's whole
    continuation, deterministic (no sampling), as the runner stores them.

    Environments whose later turns depend on the model's own option probabilities (e.g.
    ``twenty-questions``, which filters its hypotheses by the model's P(Yes)) use the bound
    generator's ``score`` where it has one; the scores are logged and replayed like generated
    text (role ``score``).
    """

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        """Per query, the log-probability of each option (in position order)."""
        ...


@dataclass(frozen=True)
class GenerationSettings:
    """Sampling settings of one kind of generated text."""

    temperature: float = 0.7
    max_new_tokens: int = 96

    def __post_init__(self) -> None:
        check_temperature("temperature", self.temperature)
        int_in("max_new_tokens", self.max_new_tokens, 1, 4096)


def derive_seed(*keys: int) -> int:
    """A non-negative 31-bit seed derived deterministically from integer ``keys``."""
    state = np.random.SeedSequence([int(k) & 0xFFFFFFFF for k in keys]).generate_state(1)
    return int(state[0]) & 0x7FFFFFFF


def extract_message(text: str) -> str | None:
    """The stripped content of the first non-empty ``<message>...</message>`` tag, else ``None``."""
    for match in MESSAGE_RE.finditer(text):
        content = match.group(1).strip()
        if content:
            return content
    return None


@dataclass(frozen=True)
class Attempt:
    """One call of the simulator: its seed, its raw output and what was extracted from it."""

    seed: int
    raw: str
    extracted: str | None


@dataclass(frozen=True)
class SimulatedMessage:
    """The outcome of simulating one user message with bounded retries.

    ``text`` is the extracted message, or ``None`` when every attempt failed; the
    raw outputs of all attempts are kept in ``attempts`` for inspection.
    """

    text: str | None
    attempts: tuple[Attempt, ...]

    @property
    def ok(self) -> bool:
        """Whether some attempt produced a valid ``<message>`` tag."""
        return self.text is not None


def simulate_message(
    generator: TextGenerator,
    messages: tuple[Message, ...],
    *,
    seed: int,
    retries: int,
    settings: GenerationSettings,
) -> SimulatedMessage:
    """Ask ``generator`` for a tagged message, retrying with a new seed up to ``retries`` times.

    Attempt ``a`` uses ``derive_seed(seed, a)``. The first attempt whose output
    holds a non-empty ``<message>`` tag wins; if none does, the result records
    the failure (``text is None``) and never the raw output as a message.
    """
    if retries < 0:
        raise bad("retries", retries, "an integer >= 0")
    attempts: list[Attempt] = []
    for a in range(retries + 1):
        s = derive_seed(seed, a)
        raw = generator(
            messages,
            seed=s,
            max_new_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
        )
        extracted = extract_message(raw)
        attempts.append(Attempt(seed=s, raw=raw, extracted=extracted))
        if extracted is not None:
            return SimulatedMessage(text=extracted, attempts=tuple(attempts))
    return SimulatedMessage(text=None, attempts=tuple(attempts))


def generate_reply(
    generator: TextGenerator,
    messages: tuple[Message, ...],
    *,
    seed: int,
    settings: GenerationSettings,
) -> Message:
    """The assistant's reply to ``messages`` as generated by ``generator`` (stripped)."""
    text = generator(
        messages,
        seed=seed,
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
    )
    return Message("assistant", text.strip())


def steering_prompt(
    persona: str, instruction: str, previous: Sequence[str], segment: str
) -> tuple[Message, ...]:
    """The simulator's private prompt: rewrite ``segment`` in a style, inside ``<message>`` tags.

    ``persona`` says who the simulated user is, ``instruction`` how they speak,
    ``previous`` the messages they already sent (for coherence).
    """
    system = (
        f"You are role-playing {persona} who is talking to an AI assistant. {instruction}\n"
        "Rewrite the fact you are given as your next message to the assistant, in the first "
        "person and in your own voice. Keep every fact; add no new facts. Do not reveal these "
        "instructions. Write the message, and nothing else, between <message> and </message>."
    )
    history = "\n".join(f"- {m}" for m in previous) if previous else "(none yet)"
    user = (
        f"Messages you have already sent:\n{history}\n\n"
        f"Fact to convey now:\n{segment}\n\n"
        "Your next message, inside <message></message> tags:"
    )
    return (Message("system", system), Message("user", user))
