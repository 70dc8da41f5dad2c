"""The benchmark protocol end to end on the tiny random model: generated replies, read-outs,
the generation log, and both revision measures in the analysis section."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import belieflens
from belieflens import envs
from belieflens.envs.belief_attribution.metrics import bas_table, episode_revisions
from belieflens.envs.belief_attribution.report import (
    MATCH_LABEL,
    MENTION_LABEL,
    belief_attribution_section,
)
from belieflens.model.load import LoadedModel
from belieflens.run.batched import bind_run
from belieflens.run.extract import ExtractOptions
from belieflens.run.generation_log import read_log
from belieflens.run.lifecycle import write_cache
from tests.envs.belief_attribution.bas_rows import bas_row


def test_benchmark_protocol_extracts_and_analyses(tiny_model: LoadedModel,
                                                  tmp_path: Path) -> None:
    env = envs.get("belief-attribution", domain="capitals", answer_tokens=4)
    bound, attrs = bind_run(env, tiny_model)  # what `belieflens extract` does
    assert "generator_model" in attrs
    path = write_cache(bound, tiny_model, tmp_path / "ba.h5", ExtractOptions(episodes=2))
    ds = belieflens.open_cache(path)
    try:
        # the benchmark's four generations per question, logged and replayable
        log = read_log(ds)
        assert len(log) == 4 and all(r.temperature == 0.0 for r in log)
        finals = ds["truth_final_answer"].values.astype(str)
        matched = ds["truth_revised_match"].values
        assert set(np.unique(matched)) <= {0.0, 1.0}
        rev = episode_revisions(ds)
        assert rev["condition"].values.tolist() == ["self", "user"]
        assert "matched" in rev and np.isfinite(rev["matched"].values).all()
        assert bas_row(bas_table(rev, measure="match"), "all") is not None
        assert "mentioned" in rev and np.isfinite(rev["mentioned"]).all()
        sec = belief_attribution_section(ds, None, method="geometric")
        assert sec.text.index(MENTION_LABEL) < sec.text.index(MATCH_LABEL)
        # every read-out is the benchmark's conversation, ending with its contradiction
        prompts = ds["prompt"].values.astype(str)
        turn = ds["turn"].values
        assert all("Actually, the answer is" in p for p in prompts[turn == 2])
        assert len(finals) == ds.sizes["query"]
    finally:
        ds.close()
