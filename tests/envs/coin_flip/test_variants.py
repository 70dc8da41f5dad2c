"""The coin-flip variants: a stated prior, named faces, no summary, noisy reports, swaps and
a paraphrased wording; each oracle recomputed from what the prompt shows, and checked against
the generative process by simulation. The defaults stay the original prompts."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.envs.coin_flip.env import (
    CoinFlip,
    bias_oracle,
    draw_episode,
    next_flip_oracle,
)
from belieflens.envs.coin_flip.posterior import Report, beliefs
from belieflens.envs.coin_flip.prompts import WORD_LISTS
from belieflens.episodes.base import Episode, Message
from belieflens.errors import ParameterError


def _messages(ms: tuple[Message, ...]) -> list[Any]:
    return [(m.role, m.content, [(s.start, s.end, s.role, s.turn) for s in m.spans]) for m in ms]


def fingerprint(params: dict[str, object]) -> str:
    """SHA-256 of every text, span, label, rotation and oracle (12 digits) of 3 episodes."""
    env = envs.get("coin-flip", **params)
    out = []
    for ep in env.episodes(3, 5):
        out.append(dict(truth=dict(ep.truth), turns=[dict(
            i=t.index, obs=t.observation,
            msgs={d: _messages(ms) for d, ms in t.messages.items()},
            probes=[dict(name=p.name, labels=p.labels, d=p.delivery,
                         oracle=[round(x, 12) for x in (p.oracle or ())],
                         queries=[(q.prefill, q.options, q.outcome, q.rotation,
                                   _messages(q.messages)) for q in p.queries])
                    for p in t.probes]) for t in ep.turns]))
    return hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("params, digest", [
    ({}, "897387486a67dae0f74b5ea8e8761529d439fbef9246a68d4f1f82d5031e5b4c"),
    ({"turns": 3, "per_turn": 2},
     "1e25014328f72527db4cf2ddf34d35e04036ebd2b44a5d5bdf06c6f1308c1074"),
    ({"a0": 2.0, "b0": 0.5, "turns": 4, "bins": 3, "delivery": "single-turn"},
     "efd1353bcddc8b54327ad0d41f1663af28ff93e5d8aada0dfb1617714aa0906e"),
    ({"theta": 0.9, "turns": 5, "delivery": "multi-turn"},
     "7f2072212fa86a79e500eb2f7c3e4b0392306e4bc6446a6c4a9a855f7c93be9b"),
])
def test_the_defaults_are_the_original_prompts_and_oracles(params: dict[str, object],
                                                           digest: str) -> None:
    """Digests taken from the environment before it had variants: studies made then stand."""
    assert fingerprint(params) == digest


def _one(params: dict[str, object], n: int = 1, seed: int = 0) -> list[Episode]:
    return list(envs.get("coin-flip", **params).episodes(n, seed))


def _next_flip(ep: Episode, t: int, delivery: str = "single-turn") -> tuple[float, ...]:
    probe = next(p for p in ep.turns[t].probes if p.name == "next-flip"
                 and p.delivery == delivery)
    assert probe.oracle is not None
    return probe.oracle


def _bias(ep: Episode, t: int, delivery: str = "single-turn") -> tuple[float, ...]:
    probe = next(p for p in ep.turns[t].probes if p.name == "bias" and p.delivery == delivery)
    assert probe.oracle is not None
    return probe.oracle


def _intro(ep: Episode) -> str:
    return ep.turns[0].messages["multi-turn"][0].content


# ------------------------------------------------------------------------- prior=stated
def test_a_stated_prior_is_the_prior_the_oracle_conditions_on() -> None:
    """The prompt's percentage and worth in flips, read back from its text, give the oracle
    (with the counts read back from the flips told)."""
    seen = set()
    for ep in _one({"prior": "stated", "turns": 6}, n=12, seed=3):
        found = re.search(r"land heads (\d+(?:\.\d+)?)% of the time on average, and that "
                          r"knowledge is worth as much as (\d+(?:\.\d+)?) flips", _intro(ep))
        assert found is not None, _intro(ep)
        mean, weight = float(found[1]) / 100, float(found[2])
        a0, b0 = mean * weight, (1 - mean) * weight
        seen.add((mean, weight))
        for t in range(7):
            told = ", ".join(x.observation for x in ep.turns[1 : t + 1]).split(", ")
            h = sum(x == "heads" for x in told if x)
            n = sum(1 for x in told if x)
            assert _next_flip(ep, t) == pytest.approx(next_flip_oracle(a0, b0, h, n))
            assert _bias(ep, t) == pytest.approx(bias_oracle(a0, b0, h, n, 5))
        assert ep.truth["a0"] == pytest.approx(a0) and ep.truth["b0"] == pytest.approx(b0)
    assert len(seen) >= 6  # episodes draw different priors


def test_stated_priors_come_from_the_sets_given() -> None:
    eps = _one({"prior": "stated", "prior_means": "0.1,0.9", "prior_weights": "3"}, n=20)
    shares = {round(float(e.truth["a0"]) / 3, 6) for e in eps}
    assert shares == {0.1, 0.9}


def test_a_prior_stated_as_counts_is_the_same_prior_read_back_from_its_counts() -> None:
    """``stated_as=counts`` tells each episode's prior as flips already seen: the counts read
    back from the text are the oracle's pseudo-counts, and the episode is the share form's
    (same prior, flips and oracles) with only that sentence changed."""
    params = {"prior": "stated", "turns": 5, "sides": "random"}
    shares = _one(params, n=15, seed=4)
    for share, counts in zip(shares, _one({**params, "stated_as": "counts"}, n=15, seed=4),
                             strict=True):
        face, other = str(counts.truth["first_face"]), str(counts.truth["second_face"])
        found = re.search(rf"already seen this coin land {face} (once|[\d.]+ times) and "
                          rf"{other} (once|[\d.]+ times)\.", _intro(counts))
        assert found is not None, _intro(counts)
        a0, b0 = (1.0 if x == "once" else float(x.split()[0]) for x in found.groups())
        assert (a0, b0) == pytest.approx((counts.truth["a0"], counts.truth["b0"]), abs=1e-9)
        assert counts.truth == share.truth and _intro(counts) != _intro(share)
        assert "worth as much as" in _intro(share) and "% of the time" not in _intro(counts)
        for t in range(6):
            assert _next_flip(counts, t) == _next_flip(share, t)


# ------------------------------------------------------------------------- sides=random
def test_random_sides_name_the_faces_everywhere_and_relabel_the_same_flips() -> None:
    plain = _one({"turns": 8}, n=6, seed=4)
    named = _one({"turns": 8, "sides": "random"}, n=6, seed=4)
    pairs = set()
    for a, b in zip(plain, named, strict=True):
        first, second = str(b.truth["first_face"]), str(b.truth["second_face"])
        assert first != second and {first, second} <= set(WORD_LISTS["a"])
        pairs.add((first, second))
        for ta, tb in zip(a.turns, b.turns, strict=True):
            assert tb.observation == ta.observation.replace("heads", "H").replace(
                "tails", "T").replace("H", first).replace("T", second)
            for pa, pb in zip(ta.probes, tb.probes, strict=True):
                assert pa.oracle == pb.oracle
                if pb.name == "next-flip":
                    assert pb.labels == (first, second)
                text = pb.queries[0].messages[-1].content
                assert "heads" not in text and "tails" not in text
                assert first in text
    assert len(pairs) == 6


def test_the_word_lists_are_disjoint_and_each_is_used() -> None:
    assert not set(WORD_LISTS["a"]) & set(WORD_LISTS["b"])
    for ep in _one({"sides": "random", "words": "b"}, n=10):
        assert {ep.truth["first_face"], ep.truth["second_face"]} <= set(WORD_LISTS["b"])


# ------------------------------------------------------------------------- summary=off
def test_summary_off_drops_the_counts_only() -> None:
    (on,) = _one({"turns": 4, "delivery": "single-turn"})
    (off,) = _one({"turns": 4, "delivery": "single-turn", "summary": "off"})
    for a, b in zip(on.turns, off.turns, strict=True):
        (ma,), (mb,) = a.messages["single-turn"], b.messages["single-turn"]
        assert "flips so far" not in mb.content
        assert not [s for s in mb.spans if s.role == "summary"]
        assert [s for s in mb.spans if s.role == "evidence"] == [
            s for s in ma.spans if s.role == "evidence"]
        assert [p.oracle for p in a.probes] == [p.oracle for p in b.probes]


# ------------------------------------------------------------------------- reports=noisy
REPORT = re.compile(r"(\w+) \(right (\d+(?:\.\d+)?)% of the time\) says (\w+)")


def test_noisy_reports_oracle_is_the_posterior_of_the_reports_as_told() -> None:
    for ep in _one({"reports": "noisy", "turns": 6, "delivery": "multi-turn"}, n=8, seed=2):
        assert "reported by an observer" in _intro(ep)
        reports: list[Report] = []
        who: dict[str, str] = {}
        for t, turn in enumerate(ep.turns):
            if t:
                (found,) = REPORT.findall(turn.observation)
                name, rel, face = found
                who.setdefault(name, rel)
                assert who[name] == rel  # an observer keeps their reliability
                reports.append(Report(1 if face == "heads" else 0, float(rel) / 100))
            expect = beliefs(1.0, 1.0, reports, bins=5)[-1]
            assert _next_flip(ep, t, "multi-turn") == pytest.approx(expect[0], abs=1e-12)
            assert _bias(ep, t, "multi-turn") == pytest.approx(expect[1], abs=1e-12)


# ------------------------------------------------------------------------- changepoint=H
def test_a_changepoint_is_stated_and_order_matters() -> None:
    (ep,) = _one({"changepoint": 0.1, "turns": 10})
    assert "there is a 10% chance that I swap the coin" in _intro(ep)
    assert "the coin now in use" in ep.turns[1].probes[1].queries[0].messages[-1].content
    # the same counts in another order: another posterior
    env = envs.get("coin-flip", changepoint=0.1, turns=10)
    assert isinstance(env, CoinFlip)
    draw = draw_episode(env.params, 0, 0)
    told = [r.face for r in draw.reports]
    if len(set(told)) > 1:
        flipped = sorted(told)
        a = beliefs(1, 1, [Report(f) for f in told], hazard=0.1)[-1][0][0]
        b = beliefs(1, 1, [Report(f) for f in flipped], hazard=0.1)[-1][0][0]
        assert a != pytest.approx(b)


@pytest.mark.parametrize("params", [
    {"reports": "noisy", "changepoint": 0.2, "prior": "stated", "turns": 5},
    {"changepoint": 0.3, "turns": 5},
    {"reports": "noisy", "turns": 5, "sides": "random"},
])
def test_the_oracles_are_calibrated_against_the_process(params: dict[str, object]) -> None:
    """Over 4,000 simulated episodes, the next-flip oracle's average equals how often the
    next flip lands on the first face, and each bias bin's mass how often the coin in use
    lies in it (within 4 standard errors): the generative process and the oracle agree."""
    env = envs.get("coin-flip", **params)
    assert isinstance(env, CoinFlip)
    flip_res, top_res, bin_res = [], [], []  # per episode: residuals summed over its turns
    for i in range(4000):
        draw = draw_episode(env.params, 11, i)
        oracles = env.oracles(draw)
        p = np.array([o[0][0] for o in oracles[:-1]])
        y = np.asarray(draw.flips, dtype=float)
        flip_res.append((y - p).sum())
        top_res.append(((y - p) * (p > 0.6)).sum())  # where the oracle leans to the first face
        thetas = (draw.theta, *draw.thetas)
        where = np.eye(5)[[min(int(th * 5), 4) for th in thetas]]
        bin_res.append((where - np.array([o[1] for o in oracles])).sum(axis=0))
    for res in (np.asarray(flip_res), np.asarray(top_res), np.asarray(bin_res)):
        se = res.std(axis=0) / np.sqrt(len(res))  # clustered by episode
        assert np.all(np.abs(res.mean(axis=0)) < 4 * se + 1e-12)


def test_a_process_that_the_oracle_does_not_describe_fails_the_calibration() -> None:
    """The calibration check has power: oracles that ignore the swaps miss the process."""
    env = envs.get("coin-flip", changepoint=0.5, turns=8)
    assert isinstance(env, CoinFlip)
    top_res = []
    for i in range(2000):
        draw = draw_episode(env.params, 11, i)
        p = np.array([next_flip_oracle(1, 1, sum(draw.flips[:t]), t)[0]  # no swaps
                      for t in range(len(draw.flips))])
        top_res.append(((np.asarray(draw.flips) - p) * (p > 0.6)).sum())
    res = np.asarray(top_res)
    assert abs(res.mean()) > 4 * res.std() / np.sqrt(len(res))


# ------------------------------------------------------------------------- wording, tempering
def test_the_paraphrase_changes_every_text_but_no_oracle() -> None:
    (a,) = _one({"turns": 3})
    (b,) = _one({"turns": 3, "wording": "paraphrase"})
    for ta, tb in zip(a.turns, b.turns, strict=True):
        for pa, pb in zip(ta.probes, tb.probes, strict=True):
            assert pa.oracle == pb.oracle and pa.labels == pb.labels
            for qa, qb in zip(pa.queries, pb.queries, strict=True):
                user_a = [m.content for m in qa.messages if m.role == "user"]
                user_b = [m.content for m in qb.messages if m.role == "user"]
                assert all(x != y for x, y in zip(user_a, user_b, strict=True))


@pytest.mark.parametrize("params", [{"reports": "noisy"}, {"changepoint": 0.2},
                                    {"prior": "stated", "sides": "random"}])
def test_tempered_variants_weight_the_evidence(params: dict[str, object]) -> None:
    env = envs.get("coin-flip", turns=6, **params)
    assert isinstance(env, CoinFlip)
    (exact,) = list(env.episodes(1, 9))
    (one,) = list(env.tempered(1.0).episodes(1, 9))
    (weak,) = list(env.tempered(0.3).episodes(1, 9))
    prior = _next_flip(exact, 0)[0]
    assert [_next_flip(one, t)[0] for t in range(7)] == pytest.approx(
        [_next_flip(exact, t)[0] for t in range(7)], abs=1e-5)
    for t in range(1, 7):  # a partial updater stays nearer the prior
        assert abs(_next_flip(weak, t)[0] - prior) <= abs(_next_flip(exact, t)[0] - prior) + 0.02


def test_probes_asks_one_question_with_the_same_read_outs() -> None:
    (both,) = _one({"turns": 2})
    (nxt,) = _one({"turns": 2, "probes": "next-flip"})
    (bias,) = _one({"turns": 2, "probes": "bias"})
    for tb, tn, tc in zip(both.turns, nxt.turns, bias.turns, strict=True):
        assert [p for p in tb.probes if p.name == "next-flip"] == list(tn.probes)
        assert [p for p in tb.probes if p.name == "bias"] == list(tc.probes)


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("params, fragment", [
    ({"prior": "stated", "prior_means": ""}, "'prior_means'"),
    ({"prior": "stated", "prior_weights": " , "}, "'prior_weights'"),
    ({"prior_means": "0.5,1.0"}, "'prior_means'"),
    ({"prior_means": "0.1234567"}, "percentages"),
    ({"prior": "stated", "a0": 2.0}, "'a0'"),
    ({"changepoint": 1.0}, "'changepoint'"),
    ({"changepoint": -0.1}, "'changepoint'"),
    ({"words": "c"}, "'words'"),
    ({"sides": "dice"}, "'sides'"),
    ({"reliabilities": "0.4,0.9"}, "'reliabilities'"),
    ({"reports": "noisy", "turns": 600, "per_turn": 2}, "'turns'"),
    ({"summary": "maybe"}, "'summary'"),
    ({"stated_as": "words"}, "'stated_as'"),
    ({"prior": "stated", "stated_as": "counts", "prior_weights": "0.3333333"}, "exactly"),
])
def test_a_bad_variant_option_is_one_line(params: dict[str, object], fragment: str) -> None:
    with pytest.raises(ParameterError) as e:
        envs.get("coin-flip", **params)
    assert fragment in str(e.value) and "\n" not in str(e.value)
