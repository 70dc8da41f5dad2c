"""Social judgment and medical triage episodes: passive, active (simulated) and self deliveries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import belieflens.envs as envs
from belieflens.envs.judgment.cases import load_builtin
from belieflens.envs.judgment.env import MedicalTriage, SocialJudgment
from belieflens.envs.judgment.styles import TRIAGE_STYLES
from belieflens.episodes.base import Message
from belieflens.episodes.delivery import ACKS
from belieflens.errors import ParameterError

PEERS = Path(__file__).resolve().parents[3].parent / "shared" / "peers" / "bayesbench"


class FakeSimulator:
    """TEST DOUBLE: 'rewrites' the given fact; gives no tag for facts containing ``fail_on``."""

    def __init__(self, fail_on: str = "\x00") -> None:
        self.fail_on = fail_on
        self.prompts: list[tuple[Message, ...]] = []

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        self.prompts.append(messages)
        fact = re.search(r"Fact to convey now:\n(.*?)\n\n", messages[-1].content, re.DOTALL)
        assert fact is not None
        if self.fail_on in fact.group(1):
            return f"RAW-UNTAGGED {fact.group(1)}"
        return f"Sure.<message>STYLED: {fact.group(1)}</message>"


class FakeReplies:
    """TEST DOUBLE: deterministic assistant replies."""

    def __call__(
        self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int, temperature: float
    ) -> str:
        return f"reply-{seed % 1000}"


def test_passive_social_episode() -> None:
    env = envs.get("social-judgment")
    assert isinstance(env, SocialJudgment) and not env.requires_generator
    ep = next(env.episodes(1, seed=0))
    case = next(c for c in env.cases if c.id == ep.truth["case"])
    assert ep.truth["label"] == case.label and ep.truth["engagement"] == "passive"
    assert ep.truth["style"] == "clean"
    assert len(ep.turns) == len(case.segments) + 1
    last = ep.turns[-1]
    multi = last.messages["multi-turn"]
    assert [m.content for m in multi[2::2]] == [s.content for s in case.segments]
    assert all(m.content in ACKS for m in multi[1::2])
    single = last.messages["single-turn"][0].content
    assert all(s.content in single for s in case.segments)
    for turn in ep.turns:
        assert [(p.name, p.delivery) for p in turn.probes] == [
            ("verdict", "single-turn"),
            ("verdict", "multi-turn"),
        ]
        assert all(p.oracle is None and p.labels == ("YTA", "NTA") for p in turn.probes)
        assert all(len(p.queries) == 2 for p in turn.probes)


def test_triage_probes() -> None:
    env = envs.get("medical-triage", delivery="multi-turn", max_segments="2")
    ep = next(env.episodes(1, seed=0))
    assert len(ep.turns) == 3
    names = [p.name for p in ep.turns[1].probes]
    assert names == ["urgency", "style"] + [f"urgency|style={s.name}" for s in TRIAGE_STYLES]
    style_probe = ep.turns[1].probes[1]
    assert style_probe.labels == tuple(s.name for s in TRIAGE_STYLES)
    cond = ep.turns[1].probes[3]
    assert "hypochondriac" in cond.queries[0].messages[-1].content
    assert all(len(p.queries) == 4 for p in ep.turns[1].probes)


def test_units_and_determinism() -> None:
    env = envs.get("medical-triage", engagement="both", styles="minimizer,accurate")
    assert isinstance(env, MedicalTriage)
    units = env.units(seed=3)
    assert len(units) == 3 * len(env.cases)
    assert [s.name if s else None for _, s in units[:3]] == [None, "accurate", "minimizer"]
    assert units == env.units(seed=3) and units != env.units(seed=4)
    passive = envs.get("medical-triage")
    assert list(passive.episodes(3, 9)) == list(passive.episodes(3, 9))
    eps = list(passive.episodes(len(load_builtin("triage")) + 1, 9))
    assert eps[-1].truth["repeat"] == 1.0 and eps[-1].truth["case"] == eps[0].truth["case"]


@pytest.mark.parametrize(
    ("env", "params", "what"),
    [
        ("social-judgment", {"engagement": "active"}, "engagement=active"),
        ("medical-triage", {"engagement": "both"}, "engagement=both"),
        ("medical-triage", {"delivery": "multi-turn-self"}, "multi-turn-self"),
        ("social-judgment", {"delivery": "all+self"}, "multi-turn-self"),
    ],
)
def test_generated_text_needs_a_bound_generator(
    env: str, params: dict[str, str], what: str
) -> None:
    e = envs.get(env, **params)
    with pytest.raises(ParameterError, match=what) as info:
        e.episodes(1, 0)
    assert "\n" not in str(info.value)


def test_active_episode_uses_only_extracted_text() -> None:
    sim = FakeSimulator()
    base = envs.get("medical-triage", engagement="active", styles="minimizer", delivery="all")
    assert isinstance(base, MedicalTriage)
    env = base.bind_generator(FakeReplies(), simulator=sim)
    ep = next(env.episodes(1, seed=2))
    case = next(c for c in env.cases if c.id == ep.truth["case"])
    assert ep.truth["engagement"] == "active" and ep.truth["style"] == "minimizer"
    assert ep.truth["sim_failures"] == 0.0
    multi = ep.turns[-1].messages["multi-turn"]
    assert [m.content for m in multi[2::2]] == [f"STYLED: {s.content}" for s in case.segments]
    everything = " ".join(m.content for t in ep.turns for ms in t.messages.values() for m in ms)
    assert "Sure." not in everything and "<message>" not in everything
    assert "Play things down" not in everything  # steering stays private
    assert "Play things down" in sim.prompts[0][0].content
    assert "STYLED: " + case.segments[0].content in sim.prompts[1][-1].content  # history
    assert next(env.episodes(1, seed=2)) == ep


def test_simulator_failure_is_recorded_not_passed_raw() -> None:
    case = load_builtin("social")[0]
    marker = case.segments[1].content[:20]
    sim = FakeSimulator(fail_on=marker)
    env = envs.get("social-judgment", engagement="active", styles="defending", sim_retries="2")
    assert isinstance(env, SocialJudgment)
    env = env.bind_generator(FakeReplies(), simulator=sim)
    ep = next(e for e in env.episodes(len(env.cases), seed=0) if e.truth["case"] == case.id)
    assert ep.truth["sim_failures"] == 1.0 and ep.truth["sim_failed"] == case.segments[1].id
    assert "RAW-UNTAGGED" in str(ep.truth["sim_log"])
    msgs = ep.turns[-1].messages["multi-turn"]
    assert msgs[4].content == case.segments[1].content  # clean fallback, recorded
    assert not any("RAW-UNTAGGED" in m.content for m in msgs)
    assert ep.truth["sim_attempts"] == float(len(case.segments) + 2)


def test_multi_turn_self_replies() -> None:
    env = envs.get("social-judgment", delivery="multi-turn-self", max_segments="3")
    assert isinstance(env, SocialJudgment)
    bound = env.bind_generator(FakeReplies())
    assert bound is not env
    ep = next(bound.episodes(1, seed=1))
    conv = ep.turns[3].messages["multi-turn-self"]
    assert [m.role for m in conv] == ["user", "assistant"] * 4
    assert all(m.content.startswith("reply-") for m in conv[1::2])
    assert ep.turns[1].messages["multi-turn-self"] == conv[:4]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("styles", "sarcastic"),
        ("styles", "accurate,accurate"),
        ("cases", "/no/such/dir"),
        ("engagement", "loud"),
        ("sim_retries", "-1"),
        ("max_segments", "-2"),
    ],
)
def test_bad_params(name: str, value: str) -> None:
    with pytest.raises(ParameterError, match=name):
        envs.get("medical-triage", **{name: value})


def test_social_styles_are_its_own() -> None:
    with pytest.raises(ParameterError, match="styles"):
        envs.get("social-judgment", styles="minimizer")
    env = envs.get("social-judgment", styles="conceding,neutral")
    assert env.params.style_names == ("neutral", "conceding")  # type: ignore[attr-defined]


@pytest.mark.skipif(not PEERS.is_dir(), reason="peer data ../shared not present")
def test_bayesbench_cases_run() -> None:
    env = envs.get(
        "medical-triage", cases=str(PEERS / "medical_triage_storyboards"), delivery="single-turn"
    )
    ep = next(env.episodes(1, seed=0))
    assert ep.truth["label"] in ("Emergency", "Urgent", "Observation", "Routine")
    assert len(ep.turns) >= 8
