"""Binary credences: MCQ debiasing and direct Yes/No continuations with variants summed."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens.envs.dutch_book.credence import outcome_logprob, yes_credence
from belieflens.errors import CacheFileError
from tests.analysis.synthetic_cache import Row, cache_dataset, mcq_rows


def test_mcq_credence_cancels_position_bias() -> None:
    rows = mcq_rows([0.7, 0.3], episode=0, turn=0, probe="credence", labels=("Yes", "No"),
                    bias=[2.0, -1.0])
    rows += mcq_rows([0.2, 0.8], episode=0, turn=1, probe="credence", labels=("Yes", "No"),
                     bias=[2.0, -1.0])
    cred = yes_credence(cache_dataset(rows), "credence")
    assert cred.dims == ("delivery", "episode", "turn")
    np.testing.assert_allclose(cred.sel(delivery="single-turn", episode=0).values, [0.7, 0.2])
    # without debiasing the first rotation alone would read the biased value
    raw = np.exp(rows[0].logprob[0])
    assert abs(raw - 0.7) > 0.1


def test_variants_are_summed_per_outcome() -> None:
    # direct continuations " Yes", " No", " yes", " no" in two orders of mention
    p = np.array([0.3, 0.2, 0.1, 0.4])
    rows = [
        Row(0, 0, "credence", "single-turn", 0, tuple(np.log(p)), (0, 1, 0, 1), ("Yes", "No")),
        Row(0, 0, "credence", "single-turn", 1, tuple(np.log(p[[1, 0, 3, 2]])), (1, 0, 1, 0),
            ("Yes", "No")),
    ]
    cred = yes_credence(cache_dataset(rows), "credence")
    assert float(cred.squeeze()) == pytest.approx(0.4)


def test_outcome_logprob_marks_missing_outcomes() -> None:
    lp = np.log(np.array([[0.5, 0.5]]))
    out = outcome_logprob(lp, np.array([[0, 0]]), 2)
    assert out[0, 0] == pytest.approx(0.0) and out[0, 1] == -np.inf


def test_unknown_probe_is_a_cache_error() -> None:
    ds = cache_dataset(mcq_rows([0.5, 0.5], episode=0, turn=0, probe="other",
                                labels=("Yes", "No")))
    with pytest.raises(CacheFileError, match="credence"):
        yes_credence(ds, "credence")
