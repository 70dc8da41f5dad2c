"""Own-answer decoders: the model's own debiased answer decoded from each layer, held out by
episode; a planted output is recovered where it is planted and not where the oracle is;
the statistic baselines explain an answer that is a function of the counts and not one that
is not; beside the untrained floor (the same target from untrained residuals); controls of
another study refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens.analysis.own_answer import own_answer_floor, own_answer_values, own_targets
from belieflens.errors import ParameterError
from tests.analysis.synthetic_coin import coin_study, counts, study_attrs


def _planted(e: int, h: int, t: int) -> float:
    """An answer that is not a function of the evidence: a per-episode mood and the turn's
    parity."""
    return float(0.5 + 0.3 * np.sin(1.7 * e + 0.9 * t))


def test_the_targets_are_the_debiased_output() -> None:
    ds = coin_study(["noise"], output=_planted)
    (task,) = own_targets(ds, np.random.default_rng(0))
    ep, turn = ds["episode"].values[task.rows], ds["turn"].values[task.rows]
    want = np.array([_planted(int(e), 0, int(t)) for e, t in zip(ep, turn, strict=True)])
    assert task.probe == "next-flip"
    assert np.allclose(task.y[:, 0], want) and np.allclose(task.y.sum(axis=1), 1.0)


def test_a_planted_output_is_recovered_where_it_is_planted() -> None:
    ds = coin_study(["bag", "output", "noise"], output=_planted)
    v = own_answer_values(ds, statistics=counts(ds))
    assert v["r2"].dims == ("probe", "layer")
    assert v["baseline_r2"].dims == ("probe", "baseline")
    r2 = v["r2"].sel(probe="next-flip").values
    assert r2[1] > 0.95                      # where the output is
    assert r2[0] < 0.3 and r2[2] < 0.1       # the bag of the evidence says nothing of it
    # nor do the counts: the answer is not a function of the evidence
    assert float(v["baseline_r2"].sel(probe="next-flip", baseline="counts")) < 0.3


def test_the_baselines_explain_an_answer_that_the_counts_give() -> None:
    ds = coin_study(["output"])  # the output is the oracle: a function of the counts
    v = own_answer_values(ds, statistics=counts(ds))
    assert float(v["baseline_r2"].sel(probe="next-flip", baseline="counts")) > 0.9
    assert float(v["r2"].sel(probe="next-flip", layer=0)) > 0.95


def test_own_answer_beside_its_untrained_floor() -> None:
    """Untrained networks hold the bag of the evidence at every layer: the trained network's
    output layer is beyond their floor, its bag layer is not."""
    ds = coin_study(["bag", "output"], output=_planted, attrs=study_attrs(0, init="trained"))
    controls = [(f"r{n}", coin_study(["bag", "bag"], net=n, output=_planted,
                                     attrs=study_attrs(n))) for n in (1, 2, 3)]
    f = own_answer_floor(ds, controls, statistics=counts(ds), n_boot=200)
    assert list(f["source"].values) == ["own answer: next-flip"]
    assert str(f["metric"].values[0]) == "r2"
    s = f.sel(source="own answer: next-flip")
    assert bool(s["exceeds"].sel(layer=1)) and not bool(s["exceeds"].sel(layer=0))
    assert np.allclose(s["selectivity_floor"], s["trained"] - s["floor_mean"])
    assert f.attrs["what"] == "own answer"


def test_a_control_of_another_study_is_refused() -> None:
    ds = coin_study(["output"], attrs=study_attrs(0, init="trained"))
    other = coin_study(["bag"], net=1, attrs=study_attrs(1, seed=7))
    with pytest.raises(ParameterError, match="another study"):
        own_answer_floor(ds, [("r1", other), ("r2", other)])
    shuffled = coin_study(["bag"], net=1, attrs=study_attrs(1)).isel(
        query=np.random.default_rng(0).permutation(ds.sizes["query"]))
    with pytest.raises(ParameterError, match="does not hold the study's read-outs"):
        own_answer_floor(ds, [("r1", shuffled), ("r2", shuffled)])


def test_the_accessor() -> None:
    ds = coin_study(["bag", "output"], output=_planted, attrs=study_attrs(0, init="trained"))
    v = ds.bl.own_answer(statistics=counts(ds))
    assert np.allclose(v["r2"], own_answer_values(ds, statistics=counts(ds))["r2"])
    controls = [coin_study(["bag", "bag"], net=n, output=_planted, attrs=study_attrs(n))
                for n in (1, 2)]
    f = ds.bl.own_answer(controls=controls)
    assert list(f["source"].values) == ["own answer: next-flip"] and f.sizes["control"] == 2
