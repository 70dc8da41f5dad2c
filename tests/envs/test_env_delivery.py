"""Conversations per delivery, including model-generated replies (with a test double)."""

from __future__ import annotations

import pytest

from belieflens.episodes.base import Message
from belieflens.episodes.delivery import ACKS, conversations, resolve
from belieflens.episodes.generation import GenerationSettings
from belieflens.errors import ParameterError


class EchoFake:
    """TEST DOUBLE: replies with the seed and the number of messages it was shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[Message, ...]] = []

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        self.seen.append(messages)
        return f" reply {seed} after {len(messages)} "


OBS = ["first", "second"]
SINGLE = ["intro", "intro first", "intro first second"]


def test_resolve() -> None:
    assert resolve("all") == ("single-turn", "multi-turn")
    assert resolve("all+self") == ("single-turn", "multi-turn", "multi-turn-self")
    assert resolve("multi-turn-self") == ("multi-turn-self",)


def test_single_and_multi_turn() -> None:
    out = conversations("intro", OBS, SINGLE, ["single-turn", "multi-turn"])
    assert [out[t]["single-turn"] for t in range(3)] == [(Message("user", s),) for s in SINGLE]
    multi = out[2]["multi-turn"]
    assert [m.role for m in multi] == ["user", "assistant"] * 3
    assert [m.content for m in multi[::2]] == ["intro", *OBS]
    assert all(m.content in ACKS for m in multi[1::2])
    assert out[1]["multi-turn"] == multi[:4]
    assert "multi-turn-self" not in out[0]


def test_self_replies_are_generated_seeded_and_stay_in_context() -> None:
    fake = EchoFake()
    out = conversations(
        "intro",
        OBS,
        SINGLE,
        ["multi-turn-self"],
        generator=fake,
        settings=GenerationSettings(0.7, 8),
        seeds=[10, 11, 12],
    )
    final = out[2]["multi-turn-self"]
    assert [m.content for m in final[1::2]] == [
        "reply 10 after 1",
        "reply 11 after 3",
        "reply 12 after 5",
    ]
    assert out[1]["multi-turn-self"] == final[:4]
    assert fake.seen[2] == final[:5]


def test_self_without_generator_is_a_parameter_error() -> None:
    with pytest.raises(ParameterError, match="multi-turn-self"):
        conversations("intro", OBS, SINGLE, ["multi-turn-self"], seeds=[1, 2, 3])
