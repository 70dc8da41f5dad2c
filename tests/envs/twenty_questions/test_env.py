"""twenty-questions games: the protocol's decisions on a deterministic scripted player (its
hypotheses, questions, answers and P(Yes) written out below), shard-invariant seeding, and end
to end on the tiny random model (extraction, the logged scores equal the stored read-outs,
replay without a model, the analysis section)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

import belieflens.envs as envs
from belieflens.envs.twenty_questions.env import TwentyQuestions
from belieflens.envs.twenty_questions.metrics import (
    answer_tally,
    games_solved,
    step_kl,
    step_table,
)
from belieflens.envs.twenty_questions.prompts import (
    ANSWERER_SYSTEM,
    HYPOTHESES_SYSTEM,
    JUDGE_SYSTEM,
    QUESTIONS_SYSTEM,
)
from belieflens.envs.twenty_questions.report import twenty_questions_section
from belieflens.episodes.base import Episode, Message, Query
from belieflens.errors import BeliefLensError
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.generate import bind_model
from belieflens.run.generation_log import (
    GenerationRecord,
    ReplayGenerator,
    read_log,
    replay,
)
from belieflens.run.lifecycle import write_cache

# P(Yes) of "question" for each animal: the scripted player's knowledge
TABLE: dict[str, dict[str, float]] = {
    "Does it have stripes?": {"Zebra": 0.9, "Tiger": 0.8, "Kiwi": 0.1, "Dolphin": 0.1},
    "Does it swim?": {"Zebra": 0.1, "Tiger": 0.3, "Kiwi": 0.1, "Dolphin": 0.9},
    "Is it a bird?": {"Zebra": 0.1, "Tiger": 0.1, "Kiwi": 0.9, "Dolphin": 0.1},
}
ANIMALS = ("Zebra", "Kiwi", "Dolphin", "Tiger")


def _p(question: str, animal: str) -> float:
    guessed = re.fullmatch(r"Is it (.+)\?", question)
    if guessed and guessed.group(1) in ANIMALS:
        return 0.95 if guessed.group(1) == animal else 0.05
    return TABLE[question][animal]


class Scripted:
    """A deterministic player: fixed lists, table answers, table P(Yes); records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float]] = []

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        system = messages[0].content
        self.calls.append((system[:20], seed, temperature))
        if system == HYPOTHESES_SYSTEM:
            return "1. Zebra\n2. Kiwi\n3. Dolphin\n4. Tiger\n5. An extremely long animal name here"
        if system == QUESTIONS_SYSTEM:
            return "\n".join(TABLE)
        animal = system.removeprefix(ANSWERER_SYSTEM).strip()
        question = messages[1].content.splitlines()[0]
        if question == f"Is it {animal}?":
            return "Correct!"
        return "Yes" if _p(question, animal) > 0.5 else "No"

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        out = []
        for q in queries:
            system, user = q.messages[0].content, q.messages[1].content
            if system == JUDGE_SYSTEM:
                animal = re.search(r"Does the animal (.+) fit all", user)
                assert animal is not None
                fits = all((_p(qq, animal.group(1)) > 0.5) == (a == "Yes")
                           for qq, a in re.findall(r"^\d+\. (.+\?) (Yes|No)$", user, re.M))
                py = 0.95 if fits else 0.05
            else:
                py = _p(user.splitlines()[0], system.removeprefix(ANSWERER_SYSTEM).strip())
            out.append((math.log(py), math.log(1 - py)))
        return tuple(out)


def _game(animals: str = "Zebra", n: int = 1, seed: int = 0, **params: object) -> list[Episode]:
    env = envs.get("twenty-questions", animals=animals, **params)
    assert isinstance(env, TwentyQuestions)
    player = Scripted()
    return list(env.bind_generator(player, simulator=player).episodes(n, seed))


def _step(ep: Episode, t: int) -> dict[str, object]:
    out: dict[str, object] = json.loads(str(ep.truth[f"step_{t}"]))
    return out


def test_the_protocol_plays_a_game_to_correct() -> None:
    (ep,) = _game(eig_sample=4)
    s0, s1, s2 = _step(ep, 0), _step(ep, 1), _step(ep, 2)
    assert s0["hypotheses"] == list(ANIMALS)           # the 34-character belief is dropped
    assert s0["questions"] == list(TABLE)
    # the stripes question splits the four 2:2, the largest EIG over outcomes
    eig = np.asarray(s0["eig"])
    assert s0["asked"] == "Does it have stripes?" and int(np.argmax(eig)) == 0
    assert s1["question"] == "Does it have stripes?" and s1["answer"] == "Yes"
    # compatibility < 0.2 drops Kiwi and Dolphin; the most compatible first
    assert s1["hypotheses"] == ["Zebra", "Tiger"]
    # |Θ1| ≤ 2: the guess, answered Correct! by the answerer, ends the run
    assert s2["question"] == "Is it Zebra?" and s2["answer"] == "Correct!"
    assert ep.truth["solved_at"] == 2.0 and ep.truth["steps_run"] == 2.0
    assert "step_3" not in ep.truth
    names = [[p.name for p in turn.probes] for turn in ep.turns]
    assert names[0] == [f"eig/{c}/{s}" for c in range(3) for s in range(4)]
    assert names[1] == [*(f"compat/{j}" for j in range(4)),
                        *(f"likelihood/1/{j}" for j in range(4))]
    assert names[2] == []
    for turn in ep.turns:
        for probe in turn.probes:
            assert probe.labels == ("Yes", "No") and probe.oracle is None
            assert [q.options for q in probe.queries] == [(" Yes", " No")]


def test_sampling_and_temperatures_follow_the_protocol() -> None:
    env = envs.get("twenty-questions", animals="Dolphin", eig_sample=2)
    assert isinstance(env, TwentyQuestions)
    player = Scripted()
    (ep,) = env.bind_generator(player).episodes(1, 3)
    s0 = _step(ep, 0)
    sample = s0["eig_sample"]
    assert isinstance(sample, list) and len(sample) == 2 and set(sample) <= set(ANIMALS)
    temps = {name: t for name, _, t in player.calls}
    assert temps[HYPOTHESES_SYSTEM[:20]] == 1.3 and temps[QUESTIONS_SYSTEM[:20]] == 1.3
    assert temps[ANSWERER_SYSTEM[:20]] == 0.7
    assert len({seed for _, seed, _ in player.calls}) == len(player.calls)  # every call seeded anew


def test_episodes_are_shard_invariant_and_seeded() -> None:
    three = _game("Zebra,Kiwi,Dolphin", 3, seed=5, eig_sample=2, steps=3)
    two = _game("Zebra,Kiwi,Dolphin", 2, seed=5, eig_sample=2, steps=3)
    assert [e.truth for e in three[:2]] == [e.truth for e in two]
    assert [e.turns for e in three[:2]] == [e.turns for e in two]
    assert [e.truth["secret"] for e in three] == ["Zebra", "Kiwi", "Dolphin"]
    samples = {json.dumps(_step(_game("Kiwi", 1, seed=s, eig_sample=2)[0], 0)["eig_sample"])
               for s in range(8)}
    assert len(samples) > 1


def test_a_generator_that_cannot_score_is_refused() -> None:
    env = envs.get("twenty-questions", animals="Zebra")
    assert isinstance(env, TwentyQuestions)

    def text_only(messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                  temperature: float) -> str:
        return "Zebra"

    with pytest.raises(BeliefLensError, match="scores read-outs"):
        next(env.bind_generator(text_only).episodes(1, 0))
    with pytest.raises(BeliefLensError):
        next(env.episodes(1, 0))


def _as_dataset(episodes: Sequence[Episode], player: Scripted) -> xr.Dataset:
    """The scripted read-outs laid out as a cache file's variables (what the section reads)."""
    rows = [(ep, turn.index, probe) for ep in episodes for turn in ep.turns
            for probe in turn.probes]
    lp = np.asarray(player.score([p.queries[0] for _, _, p in rows]))
    keys = sorted({k for ep in episodes for k in ep.truth})
    data: dict[str, tuple[tuple[str, ...], np.ndarray]] = {
        "option_logprob": (("query", "option"), lp),
        "outcome": (("query", "option"), np.tile([0, 1], (len(rows), 1))),
    }
    for k in keys:
        vals = [ep.truth.get(k, "") for ep, _, _ in rows]
        data[f"truth_{k}"] = (("query",), np.asarray(vals, dtype=object if isinstance(
            vals[0], str) else np.float64))
    coords = {"episode": ("query", [ep.index for ep, _, _ in rows]),
              "turn": ("query", [t for _, t, _ in rows]),
              "probe": ("query", [p.name for _, _, p in rows])}
    return xr.Dataset(data, coords=coords)


def test_kl_per_step_from_the_read_outs() -> None:
    env = envs.get("twenty-questions", animals="Zebra", eig_sample=4)
    assert isinstance(env, TwentyQuestions)
    player = Scripted()
    eps = list(env.bind_generator(player).episodes(1, 0))
    m = step_kl(_as_dataset(eps, player))
    # turn 1: Θ1 = (Zebra, Tiger), both compatible (0.95): the model says 1/2, 1/2; the oracle
    # weighs their likelihoods of "stripes: Yes", 0.9 and 0.8
    po = np.array([0.9, 0.8]) / 1.7
    want = float(np.sum(po * np.log(po / 0.5)))
    assert float(m["kl"].sel(episode=0, turn=1)) == pytest.approx(want)
    assert float(m["n_hypotheses"].sel(episode=0, turn=1)) == 2
    assert float(m["p_oracle_secret"].sel(episode=0, turn=1)) == pytest.approx(0.9 / 1.7)
    assert float(m["p_model_secret"].sel(episode=0, turn=1)) == pytest.approx(0.5)
    assert np.isnan(m["kl"].sel(episode=0, turn=2))   # Correct!: not recorded
    section = twenty_questions_section(_as_dataset(eps, player), None)
    assert f"{want:.4f}" in section.text and "games answered Correct!: 1 of 1" in section.text


def test_the_active_oracle_updates_by_bayes_and_asks_on_its_beliefs() -> None:
    """§4.2's third trajectory: the same secret and answerer, Θ0 the model's, beliefs by
    Bayes' rule on the model's likelihoods, questions chosen on those beliefs."""
    (ep,) = _game(eig_sample=4, steps=4)
    a0, a1, a2 = (json.loads(str(ep.truth[f"active_step_{t}"])) for t in range(3))
    assert a0["hypotheses"] == list(ANIMALS) and a0["posterior"] == [0.25] * 4
    assert a0["asked"] == "Does it have stripes?"  # a uniform belief: the model's EIG
    # stripes: Yes; P(Yes) 0.9 Zebra, 0.1 Kiwi, 0.1 Dolphin, 0.8 Tiger: ≤ 0.2 dropped
    assert a1["answer"] == "Yes" and a1["hypotheses"] == ["Zebra", "Tiger"]
    assert a1["posterior"] == pytest.approx([0.9 / 1.7, 0.8 / 1.7])
    assert a1["asked"] == "Is it Zebra?"  # its most probable θ, guessed
    assert a2["answer"] == "Correct!" and ep.truth["active_solved_at"] == 2.0
    # p_ora-act(θ*): uniform over Θ0, then Bayes, then 1 from Correct! to T
    p = [float(ep.truth[f"p_active_true_{t}"]) for t in range(5)]
    assert p == pytest.approx([0.25, 0.9 / 1.7, 1.0, 1.0, 1.0])
    (alone,) = _game(eig_sample=4, steps=4, active="false")
    assert not any(k.startswith(("active_", "p_active")) for k in alone.truth)
    assert {k: v for k, v in ep.truth.items() if k in alone.truth} == alone.truth


def test_its_questions_follow_its_beliefs_not_a_uniform_sample() -> None:
    """Secret Tiger: after stripes: Yes the oracle believes Zebra more (0.9 against 0.8) and
    guesses it first; No drops Zebra by Bayes' rule, and Tiger is guessed."""
    (ep,) = _game("Tiger", eig_sample=4, steps=4)
    a = [json.loads(str(ep.truth[f"active_step_{t}"])) for t in range(4)]
    assert [x.get("question") for x in a[1:]] == [
        "Does it have stripes?", "Is it Zebra?", "Is it Tiger?"]
    assert [x.get("answer") for x in a[1:]] == ["Yes", "No", "Correct!"]
    assert a[2]["hypotheses"] == ["Tiger"] and a[2]["posterior"] == [1.0]
    assert ep.truth["active_solved_at"] == 3.0


def test_correct_sets_p_secret_to_one_for_every_later_step_and_the_gap() -> None:
    """App. F.2.5: after Correct! "we set p(θ*)_j = 1 ∀ j ≥ k+1, and finish the current run
    without recording the KL"; the gap p_ora-act(θ*) − p_LLM(θ*) per step of Fig. 4."""
    env = envs.get("twenty-questions", animals="Zebra", eig_sample=4, steps=5)
    assert isinstance(env, TwentyQuestions)
    player = Scripted()
    eps = list(env.bind_generator(player).episodes(1, 0))
    m = step_kl(_as_dataset(eps, player)).sel(episode=0)
    assert m["turn"].values.tolist() == [0, 1, 2, 3, 4, 5]  # to T, past the game's end
    np.testing.assert_allclose(m["p_model_secret"].values, [0.25, 0.5, 1, 1, 1, 1])
    np.testing.assert_allclose(m["p_oracle_secret"].values, [0.25, 0.9 / 1.7, 1, 1, 1, 1])
    np.testing.assert_allclose(m["p_active_secret"].values, [0.25, 0.9 / 1.7, 1, 1, 1, 1])
    np.testing.assert_allclose(m["gap"].values, [0, 0.9 / 1.7 - 0.5, 0, 0, 0, 0], atol=1e-12)
    assert np.isnan(m["kl"].values[[0, 2, 3, 4, 5]]).all() and np.isfinite(m["kl"].values[1])
    section = twenty_questions_section(_as_dataset(eps, player), None)
    assert "gap p_ora-act(θ*) − p_LLM(θ*)" in section.text
    assert f"{0.9 / 1.7 - 0.5:.4f}" in section.text
    assert "by the active oracle: 1" in section.text


TINY = dict(animals="2", steps=2, candidates=2, propose=3, eig_sample=2, list_tokens=24,
            answer_tokens=3, max_chars=200, temperature=5.0, answer_temperature=5.0)
"""Tiny-model settings: its generations are noise, so names may be long and the temperature
high enough that it writes more than newlines."""


NOTIFIED: list[GenerationRecord] = []
"""The records the tiny run reported as progress (``on_record``)."""


@pytest.fixture(scope="module")
def tiny_run(tiny_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        env = bind_model(envs.get("twenty-questions", **TINY), tiny_model,
                         on_record=NOTIFIED.append)
        return write_cache(env, tiny_model, tmp_path_factory.mktemp("tq") / "tq.h5",
                       ExtractOptions(episodes=2, seed=0))
    finally:
        torch.set_num_threads(threads)


def test_tiny_model_extracts_logs_and_replays(tiny_run: Path) -> None:
    with xr.open_dataset(tiny_run, engine="h5netcdf") as ds:
        ds.load()
    records = read_log(ds)
    assert {r.role for r in records} == {"reply", "simulator", "score"}
    assert sum(r.role == "score" for r in records) >= ds.sizes["query"]
    # progress reports each scored batch once, every generated text once
    n_scores = sum(r.role == "score" for r in records)
    assert 0 < sum(r.role == "score" for r in NOTIFIED) < n_scores
    assert [r for r in NOTIFIED if r.role != "score"] == [
        dataclasses.replace(r, episode=-1) for r in records if r.role != "score"]
    # replay rebuilds the same games, read-outs and truth without the model
    env = envs.get("twenty-questions", **TINY)
    again = list(replay(env, ds).episodes(2, 0))
    rows = [(turn.index, p.name, p.queries[0]) for ep in again for turn in ep.turns
            for p in turn.probes]
    assert [(t, n) for t, n, _ in rows] == list(zip(
        ds["turn"].values.tolist(), ds["probe"].values.astype(str).tolist(), strict=True))
    for ep in again:
        for k, v in ep.truth.items():
            stored = ds[f"truth_{k}"].values[ds["episode"].values == ep.index]
            assert len(stored) == 0 or stored[0] == v or (  # NaN: a turn not played
                isinstance(v, float) and math.isnan(v) and math.isnan(float(stored[0])))
    # the scores that decided each game are the runner's stored option log-probs
    logged = np.asarray(ReplayGenerator(records, "reply").score([q for _, _, q in rows]))
    stored = ds["option_logprob"].values[:, :2]
    assert np.allclose(logged, stored, atol=1e-4)
    assert not np.allclose(logged, logged[::-1])  # the read-outs differ from one another


def test_metrics_are_xarray_with_named_dims() -> None:
    env = envs.get("twenty-questions", animals="Zebra", eig_sample=4)
    assert isinstance(env, TwentyQuestions)
    player = Scripted()
    ds = _as_dataset(list(env.bind_generator(player).episodes(1, 0)), player)
    m = step_kl(ds)
    assert all(m[v].dims == ("episode", "turn") for v in m.data_vars)
    table = step_table(m)
    assert all(table[v].dims == ("turn",) for v in table.data_vars)
    assert int(table["kl_n"].sel(turn=1)) == 1
    want = float(m["kl"].sel(episode=0, turn=1))
    assert float(table["kl_mean"].sel(turn=1)) == pytest.approx(want)
    games = games_solved(ds)
    assert int(games["games"]) == 1 and games["solved"].dims == ()


def test_tiny_model_analysis_section(tiny_run: Path, tmp_path: Path) -> None:
    with xr.open_dataset(tiny_run, engine="h5netcdf") as ds:
        ds.load()
    m = step_kl(ds)
    assert set(m.dims) == {"episode", "turn"}
    finite = m["kl"].values[np.isfinite(m["kl"].values)]
    assert (finite >= -1e-12).all()
    section = twenty_questions_section(ds, tmp_path)
    assert section.title.startswith("twenty-questions")
    assert all(p.exists() for p in section.files)
    # the answerer's replies cut at its cap (3 tokens here) are counted from the log
    answers = [r for r in read_log(ds) if r.messages[0].content.startswith(ANSWERER_SYSTEM)
               and r.role != "score"]
    tally = answer_tally(ds)
    cut = sum(r.tokens == 3 and r.stop == "length" for r in answers)
    assert int(tally["generated"]) == len(answers) > 0 and int(tally["truncated"]) == cut
    assert f"{cut} of {len(answers)} answerer generations cut at the cap of 3 tokens" in (
        section.text)


def test_the_answerer_is_the_simulator() -> None:
    env = envs.get("twenty-questions", animals="Kiwi", eig_sample=4)
    assert isinstance(env, TwentyQuestions)
    player, answerer = Scripted(), Scripted()
    (ep,) = env.bind_generator(player, simulator=answerer).episodes(1, 0)
    assert {name for name, _, _ in answerer.calls} == {ANSWERER_SYSTEM[:20]}
    assert ANSWERER_SYSTEM[:20] not in {name for name, _, _ in player.calls}
    # the model's game: stripes: No, then Is it Kiwi?; the active oracle's game asks too
    by_oracle = sum("question" in json.loads(str(v)) for k, v in ep.truth.items()
                    if k.startswith("active_step_"))
    assert ep.truth["steps_run"] == 2 and by_oracle >= 1
    assert len(answerer.calls) == 2 + by_oracle
