"""Pure logic of generated text: tag extraction, bounded retries, seeds, steering prompts; and
every environment that generates builds the same episodes when its jobs are driven together."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import pytest

import belieflens.envs as envs
from belieflens.episodes.base import Message, Query
from belieflens.episodes.capabilities import EpisodeJobs, NeedsGenerator, NeedsSimulator
from belieflens.episodes.generation import (
    GenerationSettings,
    derive_seed,
    extract_message,
    generate_reply,
    simulate_message,
    steering_prompt,
)
from belieflens.errors import ParameterError
from belieflens.run import coroutines


class ScriptedFake:
    """TEST DOUBLE: returns scripted outputs in order and records every call."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = list(outputs)
        self.calls: list[tuple[tuple[Message, ...], int, int, float]] = []

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        self.calls.append((messages, seed, max_new_tokens, temperature))
        return self.outputs.pop(0)


PROMPT = (Message("user", "rewrite this"),)
SETTINGS = GenerationSettings(0.5, 32)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<message>Hello there.</message>", "Hello there."),
        ("Sure! <message>\n  Two\nlines \n</message> done", "Two\nlines"),
        ("<MESSAGE>caps</Message>", "caps"),
        ("<message> </message><message>second</message>", "second"),
        ("<message>first</message><message>second</message>", "first"),
        ("no tag at all", None),
        ("<message>unterminated", None),
        ("<message></message>", None),
    ],
)
def test_extract_message(text: str, expected: str | None) -> None:
    assert extract_message(text) == expected


def test_first_valid_attempt_wins() -> None:
    fake = ScriptedFake(["<message>ok</message>", "never used"])
    result = simulate_message(fake, PROMPT, seed=7, retries=3, settings=SETTINGS)
    assert result.ok and result.text == "ok"
    assert len(result.attempts) == 1 and len(fake.calls) == 1
    assert fake.calls[0][1:] == (derive_seed(7, 0), 32, 0.5)


def test_retries_use_new_seeds_until_a_tag_appears() -> None:
    fake = ScriptedFake(["raw text, no tag", "<message></message>", "<message>third</message>"])
    result = simulate_message(fake, PROMPT, seed=3, retries=3, settings=SETTINGS)
    assert result.text == "third"
    seeds = [c[1] for c in fake.calls]
    assert seeds == [derive_seed(3, a) for a in range(3)]
    assert len(set(seeds)) == 3
    assert [a.extracted for a in result.attempts] == [None, None, "third"]


def test_failure_is_recorded_and_raw_text_never_passed() -> None:
    fake = ScriptedFake(["raw one", "raw two", "raw three"])
    result = simulate_message(fake, PROMPT, seed=1, retries=2, settings=SETTINGS)
    assert not result.ok and result.text is None
    assert [a.raw for a in result.attempts] == ["raw one", "raw two", "raw three"]
    assert len(fake.calls) == 3


def test_zero_retries_means_one_attempt_and_negative_is_rejected() -> None:
    fake = ScriptedFake(["nothing"])
    assert simulate_message(fake, PROMPT, seed=1, retries=0, settings=SETTINGS).attempts[0].raw
    with pytest.raises(ParameterError):
        simulate_message(ScriptedFake([]), PROMPT, seed=1, retries=-1, settings=SETTINGS)


def test_derive_seed_is_deterministic_and_31_bit() -> None:
    assert derive_seed(1, 2, 3) == derive_seed(1, 2, 3)
    assert derive_seed(1, 2, 3) != derive_seed(1, 2, 4)
    assert all(0 <= derive_seed(s, 9) < 2**31 for s in range(50))


def test_generate_reply_strips_and_passes_settings() -> None:
    fake = ScriptedFake(["  Sure, go on.\n"])
    reply = generate_reply(fake, PROMPT, seed=11, settings=SETTINGS)
    assert reply == Message("assistant", "Sure, go on.")
    assert fake.calls[0][1:] == (11, 32, 0.5)


def test_steering_prompt_is_private_instruction_plus_fact() -> None:
    msgs = steering_prompt("a patient", "Play it down.", ["earlier message"], "It hurts.")
    assert [m.role for m in msgs] == ["system", "user"]
    assert "Play it down." in msgs[0].content and "<message>" in msgs[0].content
    assert "It hurts." in msgs[1].content and "earlier message" in msgs[1].content


def test_settings_validate() -> None:
    with pytest.raises(ParameterError):
        GenerationSettings(temperature=-1.0)
    with pytest.raises(ParameterError):
        GenerationSettings(max_new_tokens=0)


class Hashed:
    """TEST DOUBLE: a generator and scorer whose answer is a function of the prompt and seed
    alone (a list, a tagged message, a letter, numbers, a Yes), so that any order of calls
    answers alike."""

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        h = int(hashlib.sha256(repr((messages, seed)).encode()).hexdigest()[:8], 16)
        return (f"<message>note {h % 97}</message>\nZebra\nKiwi {h % 5}\nIs it big?\n"
                f"Yes. {'ABC'[h % 3]}. 0.{h % 9} 0.5")

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        out = []
        for q in queries:
            h = int(hashlib.sha256(repr(q).encode()).hexdigest()[:8], 16)
            out.append(tuple(-1.0 - ((h >> j) % 7) / 3 for j in range(len(q.options))))
        return tuple(out)


class Asking:
    """Asks the driver for every answer (inside a driven job), else answers itself."""

    def __init__(self, fake: Hashed) -> None:
        self.fake = fake

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        if coroutines.current() is None:
            return self.fake(messages, seed=seed, max_new_tokens=max_new_tokens,
                             temperature=temperature)
        return str(coroutines.ask(("text", messages, seed, max_new_tokens, temperature)))

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        if coroutines.current() is None:
            return self.fake.score(queries)
        return tuple(coroutines.ask(("score", tuple(queries))))


GENERATING: list[tuple[str, dict[str, object]]] = [
    ("recommender", dict(types=2, movies=3, targets=1, turns=2, conditional=False)),
    ("social-judgment", dict(engagement="active", styles="neutral", max_segments=2,
                             delivery="multi-turn-self")),
    ("medical-triage", dict(delivery="multi-turn-self", max_segments=2)),
    ("protein-world", dict(classes=2, attributes=2, steps=2, sequence="model",
                           stated="sampled", truth="each-class")),
    ("protein-world", dict(classes=2, attributes=2, steps=2, sequence="model-mcq",
                           stated="off", truth="each-class")),
    ("belief-attribution", dict()),
    ("belief-attribution", dict(protocol="belieflens", stated="model", condition="both")),
    ("dutch-book", dict(answers="model")),
    ("twenty-questions", dict(animals="3", steps=2, candidates=2, propose=3, eig_sample=2)),
]


@pytest.mark.parametrize(("name", "params"), GENERATING)
def test_episode_jobs_driven_together_build_the_same_episodes(
    name: str, params: dict[str, object]
) -> None:
    """Every environment that generates splits its episodes into independent jobs: driven
    together, each step's calls answered at once, they build the episodes of a sequential run."""
    fake = Hashed()
    env = envs.get(name, **params)
    assert isinstance(env, EpisodeJobs) and isinstance(env, NeedsGenerator)
    assert env.requires_generator
    sim: dict[str, Asking] = {"simulator": Asking(fake)} if isinstance(env, NeedsSimulator) else {}
    bound = env.bind_generator(Asking(fake), **sim)
    assert isinstance(bound, EpisodeJobs)
    sequential = list(bound.episodes(5, 3))
    widths: list[int] = []

    def serve(requests: list[Any]) -> list[Any]:
        widths.append(len(requests))
        return [fake(r[1], seed=r[2], max_new_tokens=r[3], temperature=r[4])
                if r[0] == "text" else fake.score(r[1]) for r in requests]

    driven = [ep for ep, _ in coroutines.drive(bound.episode_jobs(5, 3), serve, window=3)]
    assert repr(driven) == repr(sequential)  # NaN-safe equality of every field
    assert [ep.index for ep in driven] == list(range(5)) and max(widths) > 1
