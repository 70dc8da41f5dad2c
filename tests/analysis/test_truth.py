"""Episode truth read back per episode."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens.analysis.truth import TRUTH_PREFIX, episode_truth, has_truth
from belieflens.errors import CacheFileError
from tests.analysis.synthetic_cache import cache_dataset, mcq_rows


def test_episode_truth_collapses_queries() -> None:
    rows = []
    for e, (label, x) in enumerate([("a", 1.5), ("b", 2.5), ("c", 3.5)]):
        rows += mcq_rows([0.5, 0.5], episode=2 - e, turn=0, probe="p", labels=("x", "y"),
                         truth={"kind": label, "x": x})
    ds = cache_dataset(rows)
    kind = episode_truth(ds, "kind")
    assert kind["episode"].values.tolist() == [0, 1, 2]
    assert kind.values.tolist() == ["c", "b", "a"]
    np.testing.assert_allclose(episode_truth(ds, "x").values, [3.5, 2.5, 1.5])
    assert has_truth(ds, "x") and not has_truth(ds, "y")
    with pytest.raises(CacheFileError, match="'y'"):
        episode_truth(ds, "y")


def test_prefix_matches_the_extraction_stage() -> None:
    from belieflens.run.extract import TRUTH_PREFIX as WRITTEN

    assert TRUTH_PREFIX == WRITTEN
