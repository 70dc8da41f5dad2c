"""Pure logic of generated text: tag extraction, bounded retries, seeds, steering prompts."""

from __future__ import annotations

import pytest

from belieflens.episodes.base import Message
from belieflens.episodes.generation import (
    GenerationSettings,
    derive_seed,
    extract_message,
    generate_reply,
    simulate_message,
    steering_prompt,
)
from belieflens.errors import ParameterError


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
