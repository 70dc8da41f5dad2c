"""End-to-end on the embedded model: dutch-book, protein-world and belief-attribution runs
through extraction and their analysis sections (tiny sizes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import belieflens
import belieflens.envs as envs
from belieflens.envs.belief_attribution.metrics import episode_revisions
from belieflens.envs.belief_attribution.report import belief_attribution_section
from belieflens.envs.dutch_book.metrics import lens_sure_loss, scenario_scores
from belieflens.envs.protein_world.metrics import step_metrics
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache

pytestmark = pytest.mark.real_model


def test_dutch_book_end_to_end(smol_model: LoadedModel, tmp_path: Path,
                               unrendered_figures: None) -> None:
    from belieflens.api import analyze

    # the yes-no read-out: the words Yes/No with their lower-case variants summed
    env = envs.get("dutch-book", kind="normalisation", readout="yes-no")
    path = write_cache(env, smol_model, tmp_path / "db.h5", ExtractOptions(episodes=1, max_rows=8))
    ds = belieflens.open_cache(path)
    try:
        scores = scenario_scores(ds)
        assert set(scores["delivery"].values) == {"single-turn", "multi-turn"}
        assert bool(scores["scored"].all()) and set(scores["kind"].values) == {"normalisation"}
        cred = scores["credence"]
        assert cred.sizes["question"] == 2
        assert bool(((cred > 0.0) & (cred < 1.0)).all())
        # the hand book's loss is |p(A) + p(not A) - 1|, and the LP finds the same
        np.testing.assert_allclose(scores["hand_loss"], abs(cred.sum("question") - 1.0),
                                   atol=1e-9)
        np.testing.assert_allclose(scores["lp_loss"], scores["hand_loss"], atol=1e-6)
        lens = lens_sure_loss(ds)
        assert lens.sizes["layer"] == 31 and np.all(np.isfinite(lens.values))
        # the lens's last layer reproduces the output credences (single-token options)
        np.testing.assert_allclose(lens.isel(layer=-1), scores["hand_loss"], atol=2e-3)
    finally:
        ds.close()
    result = analyze(path, tmp_path / "report")
    names = {f.name for f in result.files}
    assert {"dutch_book_loss.png", "dutch_book_lens.png", "report.md"} <= names
    assert "Dutch-book coherence" in (tmp_path / "report" / "report.md").read_text()


def test_protein_world_end_to_end(smol_model: LoadedModel, tmp_path: Path) -> None:
    from belieflens.run.generate import bind_model

    # the published protocol: the model chooses the experiment and states its posterior
    env = bind_model(envs.get("protein-world", classes=2, attributes=2, steps=1,
                              delivery="single-turn", stated_tokens=32), smol_model)
    path = write_cache(env, smol_model, tmp_path / "pw.h5", ExtractOptions(episodes=1, max_rows=8))
    ds = belieflens.open_cache(path)
    try:
        m = step_metrics(ds).sel(delivery="single-turn")
        for name in ("kl", "gap_revealed", "p_model_true", "p_active_true"):
            assert np.all(np.isfinite(m[name].values)), name
        assert np.all(m["kl"].values >= 0)
        assert np.all(np.isfinite(m["choice_match"].sel(turn=0).values))
        assert np.all(m["eig_regret"].sel(turn=0).values >= -1e-12)
        # before any experiment the active experimenter knows only the prior
        np.testing.assert_allclose(m["p_active_true"].sel(turn=0), m["p_passive_true"].sel(turn=0))
        # every stated reply is counted, parsed or not; a parsed one has a KL
        parsed = m["stated_parsed"].values
        assert set(parsed.ravel().tolist()) <= {0.0, 1.0}
        assert np.array_equal(np.isfinite(m["kl_stated"].values), parsed > 0.5)
        # chosen under the stated posterior, or the seeded draw where it did not parse
        source = str(ds["truth_choice_source_0"].values.ravel()[0])
        assert source == ("eig-stated" if parsed.ravel()[0] > 0.5 else "fallback")
    finally:
        ds.close()


def test_belief_attribution_with_the_models_own_answer(
    smol_model: LoadedModel, tmp_path: Path
) -> None:
    from belieflens.run.generate import ModelGenerator

    env = envs.get("belief-attribution", protocol="belieflens", questions="shipped",
                   stated="model", domain="geography", answer_tokens=16)
    bound = env.bind_generator(ModelGenerator(smol_model))  # type: ignore[attr-defined]
    path = write_cache(bound, smol_model, tmp_path / "ba.h5",
                       ExtractOptions(episodes=2, max_rows=8))
    ds = belieflens.open_cache(path)
    try:
        own = ds["truth_own_answer"].values.astype(str)
        assert own[0].strip() and own[0] == own[-1]  # one greedy answer shared by the pair
        rev = episode_revisions(ds)
        assert rev["condition"].values.tolist() == ["self", "user"]
        finite = np.isfinite(rev["shift"].values)
        matched = ds["truth_own_matched"].values[0] > 0.5
        assert finite.all() == matched
        assert np.all(np.abs(rev["shift"].values[finite]) <= 1.0)
        sec = belief_attribution_section(ds, tmp_path / "out", method="geometric")
        assert sec.files[0].exists() and "all" in sec.text
    finally:
        ds.close()
