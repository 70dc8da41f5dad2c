"""End to end on the embedded model: recommender, social judgment and medical triage with
generated replies (``multi-turn-self``) and a simulated user (active engagement; the
simulator is the same model), extracted to cache files, replayed and analysed.

Tiny sizes (1 turn / segment, few new tokens): generation is slow on CPU. Between them
the three runs cover every delivery, passive and active engagement, and the style probes.
The fixture runs on one CPU thread: with other work on the two cores, extraction on 2
threads ran ~10x slower than on 1 here (106 s vs 11 s for the same 48 read-outs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import belieflens
import belieflens.envs as envs
from belieflens.api import analyze
from belieflens.episodes.generation import extract_message
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.generate import bind_model
from belieflens.run.generation_log import read_log, replay
from belieflens.run.lifecycle import write_cache

pytestmark = pytest.mark.real_model

THREADS = 1

REPLY = 12
"""New tokens per generated reply."""

SIM = 32
"""New tokens per simulator output."""

RECOMMENDER = dict(types=2, movies=1, targets=1, turns=1, delivery="all+self",
                   conditional=False, reply_tokens=REPLY)
SOCIAL = dict(engagement="both", styles="neutral,defending", max_segments=1, delivery="all",
              sim_tokens=SIM, sim_retries=0)
TRIAGE = dict(engagement="active", styles="hypochondriac", max_segments=1,
              delivery="multi-turn-self", reply_tokens=REPLY, sim_tokens=SIM, sim_retries=0)


RUNS: dict[str, tuple[dict[str, Any], int, set[str]]] = {
    # env: (parameters, episodes, deliveries)
    "recommender": (RECOMMENDER, 1, {"single-turn", "multi-turn", "multi-turn-self"}),
    "social-judgment": (SOCIAL, 3, {"single-turn", "multi-turn"}),
    "medical-triage": (TRIAGE, 1, {"multi-turn-self"}),
}

TITLES = {
    "recommender": "Recommender: type and rating",
    "social-judgment": "social-judgment: invariance and accuracy",
    "medical-triage": "medical-triage: invariance and accuracy",
}


@pytest.fixture(scope="module")
def extracted(
    smol_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """Extract an environment's file on first use (one run per environment per module)."""
    folder = tmp_path_factory.mktemp("generated")
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            params, episodes, _ = RUNS[name]
            env = bind_model(envs.get(name, **params), smol_model)
            threads = torch.get_num_threads()
            torch.set_num_threads(THREADS)
            try:
                done[name] = write_cache(env, smol_model, folder / f"{name}.h5",
                                     ExtractOptions(episodes=episodes))
            finally:
                torch.set_num_threads(threads)
        return done[name]

    return get


@pytest.mark.parametrize("name", list(RUNS))
def test_every_delivery_is_extracted_and_analysed(
    name: str, extracted: Callable[[str], Path], tmp_path: Path, unrendered_figures: None
) -> None:
    path = extracted(name)
    ds = belieflens.open_cache(path)
    assert set(ds["delivery"].values.astype(str)) == RUNS[name][2]
    assert set(ds["turn"].values.tolist()) == {0, 1}
    assert np.isfinite(ds["option_logprob"].values[ds["outcome"].values >= 0]).all()
    ds.close()
    result = analyze(path, tmp_path)
    assert f"== {TITLES[name]} ==" in result.text
    pngs = {p.name for p in result.files if p.suffix == ".png"}
    assert ("recommender.png" if name == "recommender" else f"{name}.png") in pngs
    assert TITLES[name] in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("name", ["recommender", "medical-triage"])
def test_generated_replies_are_stored_and_replay(
    name: str, extracted: Callable[[str], Path]
) -> None:
    ds = belieflens.open_cache(extracted(name))
    recs = [r for r in read_log(ds) if r.role == "reply"]
    assert len(recs) == 2  # after the intro, after turn 1
    assert all(0 < r.tokens <= REPLY and r.temperature == 0.7 for r in recs)
    # every generated reply is in the context of every later multi-turn-self read-out
    self_rows = ds["delivery"].values.astype(str) == "multi-turn-self"
    prompts = ds["prompt"].values[self_rows]
    turns = ds["turn"].values[self_rows]
    for t, rec in enumerate(recs):
        assert all(rec.text.strip() in p for p, tt in zip(prompts, turns, strict=True) if tt >= t)
    # the log alone rebuilds the conversations
    params = RECOMMENDER if name == "recommender" else TRIAGE
    (ep,) = list(replay(envs.get(name, **params), ds).episodes(1, seed=0))
    last = ep.turns[-1].messages["multi-turn-self"]
    assert [m.content for m in last if m.role == "assistant"] == [r.text.strip() for r in recs]
    ds.close()


def test_active_simulator_messages_or_recorded_failures(
    extracted: Callable[[str], Path]
) -> None:
    ds = belieflens.open_cache(extracted("social-judgment"))
    eng = ds["truth_engagement"].values.astype(str)
    episode = ds["episode"].values
    active = sorted(set(episode[eng == "active"].tolist()))
    assert len(active) == 2 and set(ds["truth_style"].values.astype(str)) == {
        "clean", "neutral", "defending"}
    recs = read_log(ds)
    assert [r.role for r in recs] == ["simulator", "simulator"]  # one segment per active ep
    for e, rec in zip(active, recs, strict=True):
        assert rec.episode == e and rec.max_new_tokens == SIM
        assert "<message>" in rec.messages[0].content  # the private steering prompt
        rows = episode == e
        prompt = str(ds["prompt"].values[rows][-1])
        failures = float(ds["truth_sim_failures"].values[rows][0])
        msg = extract_message(rec.text)
        if msg is not None:
            assert failures == 0 and msg in prompt
        else:  # recorded, and the raw output never enters the context
            assert failures == 1 and rec.text.strip() not in prompt
            (seg,) = json.loads(str(ds["truth_sim_log"].values[rows][0]))
            assert seg["attempts"] == [{"seed": rec.seed, "raw": rec.text}]
    ds.close()
