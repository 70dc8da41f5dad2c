"""Interchange patching on the embedded model (SmolLM2-135M): the two exact identities."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from belieflens.interventions.pairs import pair_instances
from belieflens.interventions.patch import PatchOptions, patch_logprobs
from belieflens.interventions.readouts import Selection, read_study


def test_patching_identities_on_the_embedded_model(
    smol_model: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import belieflens.envs as envs
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    env = envs.get("coin-flip", turns=1, bins=2, delivery="multi-turn")
    path = write_cache(env, smol_model, tmp_path_factory.mktemp("real") / "study.h5",
                   ExtractOptions(episodes=3, seed=0))
    study = read_study(path)
    pairs = pair_instances(study, Selection(probes=("next-flip",)))[:2]
    assert pairs
    last = smol_model.info.n_layers
    ds = patch_logprobs(smol_model, study, pairs,
                        PatchOptions(layers=(0, last), positions=("answer", "all")))
    source = ds["source_logprob"].values
    np.testing.assert_allclose(ds["patched_logprob"].sel(layer=0, positions="all").values,
                               source, atol=1e-4)
    np.testing.assert_allclose(ds["patched_logprob"].sel(layer=last, positions="answer").values,
                               source, atol=1e-4)
    np.testing.assert_allclose(ds["base_logprob"].values, ds["study_option_logprob"].values,
                               atol=2e-3)
