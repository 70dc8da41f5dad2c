"""Transfer decoders: fitted on one condition, scored on another, held out by episode; a
decoder that reads a bag of the faces' tokens does not carry over to random face names where
one that reads the count does; beside the statistic baselines' transfer and the untrained
floor's; pairs of controls by network; bad conditions refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from belieflens.analysis.decoders.estimator import ridge_map
from belieflens.analysis.decoders.heldout import heldout_ridge, transfer_ridge
from belieflens.analysis.transfer import (
    Condition,
    condition_label,
    pair_controls,
    shared_baselines,
    transfer_floor,
    transfer_pairs,
    transfer_values,
)
from belieflens.errors import ParameterError
from tests.analysis.synthetic_coin import Layer, coin_study, counts, study_attrs

RANDOM = '{"turns": 6, "sides": "random"}'


def _pair(layers: list[Layer], net: int, init: str = "trained"
          ) -> tuple[xr.Dataset, xr.Dataset]:
    """One network's files of the heads/tails condition and of the random names condition
    (the same flips)."""
    a = coin_study(layers, names="fixed", net=net, attrs=study_attrs(net, init=init))
    b = coin_study(layers, names="random", net=net,
                   attrs=study_attrs(net, init=init, env_params=RANDOM))
    return a, b


def test_transfer_ridge_on_its_own_rows_is_the_held_out_fit() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(90, 4))
    y = x @ rng.normal(size=(4, 2)) + 0.1 * rng.normal(size=(90, 2))
    f = np.arange(90) % 5
    assert np.allclose(transfer_ridge(x, y, f, x, f), heldout_ridge(x, y, f)[0])
    # a test row is predicted by its fold's fit: moving it to another fold changes it
    other = (f + 1) % 5
    assert not np.allclose(transfer_ridge(x, y, f, x, other), heldout_ridge(x, y, f)[0])


def test_a_bag_of_tokens_does_not_transfer_to_random_names_where_a_belief_does() -> None:
    a, b = _pair(["bag", "belief"], net=0)
    v = transfer_values(Condition(a, statistics=counts(a)), Condition(b, statistics=counts(b)))
    assert v["transfer"].dims == ("delivery", "probe", "episode", "turn", "layer")
    assert v["baseline_transfer"].dims == ("delivery", "probe", "episode", "turn", "baseline")
    mean = {k: v[k].mean(["delivery", "probe", "episode", "turn"]) for k in
            ("transfer", "within")}
    bag, belief = 0, 1
    own_a = transfer_values(Condition(a))["within"].mean(["delivery", "probe", "episode",
                                                         "turn"])
    assert float(own_a[bag]) < 0.05          # the bag reads the oracle under fixed names...
    assert float(mean["transfer"][bag]) > 0.1  # ...and not under other names
    assert float(mean["transfer"][belief]) < 0.03
    assert float(mean["transfer"][belief]) <= float(mean["transfer"][bag]) / 4
    # the counts are a statistic of the evidence, not of its tokens: the same in both
    # conditions, they transfer as well as they read within the test condition
    assert np.allclose(v["baseline_transfer"].sel(baseline="counts"),
                       v["baseline_within"].sel(baseline="counts"), equal_nan=True)
    assert (v.attrs["train"], v.attrs["test"]) == ("sides=heads-tails", "sides=random")


def test_held_out_by_episode_across_files() -> None:
    """A test read-out is predicted by a fit that never saw its episode in training: from a
    residual that names the read-out (a code per episode and turn, the same in both files),
    a fit that saw it reads its oracle back; held out, it cannot."""
    a, b = _pair(["noise"], net=0)
    code = np.random.default_rng(5).normal(size=(24, 7, 240))
    a, b = (ds.drop_vars("resid").assign(resid=(("query", "layer", "d_model"), code[
        ds["episode"].values, ds["turn"].values][:, None, :])) for ds in (a, b))
    held = float(transfer_values(Condition(a), Condition(b))["transfer"].mean())
    x = a["resid"].values[:, 0]
    seen = ridge_map(x, a["oracle"].values, a["episode"].values % 5, lambdas=[1e-6])
    leak = float(np.abs(seen(b["resid"].values[:, 0])[:, 0] - b["oracle"].values[:, 0]).mean())
    assert held > 0.1 and leak < 0.01
    (p,) = transfer_pairs(Condition(a), Condition(b), np.random.default_rng(0))
    fold_of = dict(zip(a["episode"].values[p.train_rows], p.train_folds, strict=True))
    assert all(fold_of[e] == f for e, f in zip(b["episode"].values[p.test_rows],
                                               p.test_folds, strict=True))


def test_one_file_from_one_delivery_to_another() -> None:
    a = coin_study(["belief"], attrs=study_attrs(0, init="trained"))
    single = a.assign_coords(delivery=("query", np.full(a.sizes["query"], "single-turn")))
    both = xr.concat([a, single], "query")
    v = transfer_values(Condition(both, "multi-turn"), Condition(both, "single-turn"))
    assert v["delivery"].values.tolist() == ["single-turn"]
    assert float(v["transfer"].mean()) < 0.03
    assert v.attrs["train"] == "multi-turn" and v.attrs["test"] == "single-turn"
    with pytest.raises(ParameterError, match="delivery 'text' is not in"):
        transfer_values(Condition(both, "text"), Condition(both, "single-turn"))


def test_baselines_transfer_only_where_both_conditions_declare_them_alike() -> None:
    a = coin_study(["belief"])
    cond = Condition(a, statistics={"counts": np.zeros((a.sizes["query"], 2)),
                                    "turn": np.zeros((a.sizes["query"], 11))})
    other = Condition(a, statistics={"counts": np.zeros((a.sizes["query"], 2)),
                                     "turn": np.zeros((a.sizes["query"], 21))})
    assert shared_baselines(cond, other) == ["counts"]


def test_labels_name_what_differs() -> None:
    a, b = _pair(["belief"], net=0)
    assert condition_label(Condition(a), Condition(b)) == "sides=heads-tails"
    assert condition_label(Condition(b), Condition(a)) == "sides=random"


def test_the_transfer_beside_its_untrained_floor() -> None:
    """Untrained networks hold a bag of the tokens at every layer: their transfer to random
    names fails, so the trained network's belief layer is beyond its floor (and beyond the
    counts, which a linear read gives only roughly); its bag layer is not. Six seeds: with
    fewer, the seeds' spread (Student's t) leaves the interval wide."""
    a, b = _pair(["bag", "belief"], net=0)
    controls = [_pair(["bag", "bag"], net=n, init="random") for n in range(1, 7)]
    f = transfer_floor(Condition(a, statistics=counts(a)), Condition(b, statistics=counts(b)),
                       controls=[(f"r{i}a", c[0]) for i, c in enumerate(controls)],
                       test_controls=[(f"r{i}b", c[1]) for i, c in enumerate(controls)][::-1],
                       n_boot=200)
    assert list(f["source"].values) == ["transfer", "within"]
    assert f["selectivity"].dims == ("source", "layer")
    assert list(f["baseline"].values) == ["counts", "turn"]
    moved = f.sel(source="transfer")
    assert moved["exceeds"].values.tolist() == [False, True]
    assert not bool(moved["exceeds_floor"].sel(layer=0))
    assert str(moved["baseline_best"].values) == "counts"
    assert np.allclose(moved["selectivity_floor"], moved["floor_mean"] - moved["trained"])
    assert f.attrs["test"] == "sides=random"
    assert list(f["control"].values) == [f"untrained seed {n}" for n in range(1, 7)]


def test_controls_pair_by_network_and_belong_to_their_study() -> None:
    a, b = _pair(["belief"], net=0)
    r1a, r1b = _pair(["bag"], net=1, init="random")
    r2a, r2b = _pair(["bag"], net=2, init="random")
    pairs = pair_controls(Condition(a), Condition(b), [("r1a", r1a), ("r2a", r2a)],
                          [("r2b", r2b), ("r1b", r1b)])
    assert [(x.attrs["weights_hash"], y.attrs["weights_hash"]) for x, y in pairs] == [
        ("net1", "net1"), ("net2", "net2")]
    with pytest.raises(ParameterError, match="no --transfer-floor file holds its network"):
        pair_controls(Condition(a), Condition(b), [("r1a", r1a), ("r2a", r2a)],
                      [("r1b", r1b)])
    with pytest.raises(ParameterError, match="another study"):  # a test control as training's
        pair_controls(Condition(a), Condition(b), [("r1b", r1b)], [("r1b", r1b)])


def test_the_accessor() -> None:
    a, b = _pair(["bag", "belief"], net=0)
    v = a.bl.transfer(b, statistics=counts(a), other_statistics=counts(b))
    assert v["transfer"].dims == ("delivery", "probe", "episode", "turn", "layer")
    assert list(v["baseline"].values) == ["counts", "turn"]
    ref = transfer_values(Condition(a, statistics=counts(a)), Condition(b, statistics=counts(b)))
    assert np.allclose(v["transfer"], ref["transfer"], equal_nan=True)
    controls = [_pair(["bag", "bag"], net=n, init="random") for n in (1, 2)]
    f = a.bl.transfer(b, controls=[c[0] for c in controls],
                      other_controls=[c[1] for c in controls])
    assert f["selectivity"].dims == ("source", "layer") and f.sizes["control"] == 2
