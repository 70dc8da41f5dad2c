"""Teaching a tiny model for a few steps: the loss falls, the adapter folder is a model whose
read-outs are those of the model as trained, its provenance is complete, and a run stopped by
SIGTERM resumes to the adapters of an uninterrupted run."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import belieflens
from belieflens.errors import InterruptedRunError, ParameterError
from belieflens.model.load import ModelSource, adapter_folder, bridge_from_hf
from belieflens.train.teach import (
    CHECKPOINT,
    COIN_FLIP_MIX,
    PRIOR_DRILLS,
    SHIPPED,
    TRAIN_SEED_OFFSET,
    Progress,
    TeachConfig,
    TeachResult,
    learning_rate,
    parse_layers,
    parse_temper,
    prior_drills,
    step_trees,
    teach,
)
from tests.conftest import assert_same_data

pytestmark = pytest.mark.usefixtures("one_thread")


def config(tiny_dir: Path, **changes: object) -> TeachConfig:
    """A coin flip of one turn, one episode: 4 trees of 7 read-outs, each step all of them."""
    base = TeachConfig(env="coin-flip", env_params=(("turns", 1),), model=str(tiny_dir),
                       episodes=1, steps=6, batch=4, rank=4, alpha=8.0, layers=(1,), lr=3e-2,
                       warmup=0)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def taught(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TeachResult:
    return teach(config(tiny_dir), tmp_path_factory.mktemp("taught") / "adapter")


def test_the_loss_falls(taught: TeachResult) -> None:
    curve = taught.info["training"]["loss_curve"]
    assert len(curve) == 6
    assert curve[-1] < 0.8 * curve[0], curve


def test_provenance_is_complete(taught: TeachResult, tiny_dir: Path) -> None:
    info = json.loads((taught.path / "teach.json").read_text())
    assert info["base"]["spec"] == str(tiny_dir)
    assert len(info["base"]["weights_hash"]) == 64
    assert info["env"] == "coin-flip" and info["env_params"]["turns"] == 1
    assert info["env_params"]["a0"] == 1.0  # every parameter, defaults included
    assert set(info["options"]) == {f.name for f in dataclasses.fields(TeachConfig)}
    assert info["training_episodes"] == {"seed": TRAIN_SEED_OFFSET, "episodes": 1,
                                         "rng": "numpy default_rng([seed, episode])"}
    assert info["layers"] == [1] and info["target"] == "oracle"
    tr = info["training"]
    assert tr["readouts"] == 28 and tr["trees"] == 4 and tr["cpu_seconds"] > 0
    assert tr["peak_rss_mb"] > 0 and info["provenance"]["peft"] == "0.21.2"
    assert not (taught.path / CHECKPOINT).exists()
    assert sorted(p.name for p in taught.path.iterdir()) == [
        "adapter_config.json", "adapter_model.safetensors", "prompts.txt", "teach.json"]
    assert info["conditions"] == [{"params": info["env_params"], "seed": TRAIN_SEED_OFFSET,
                                   "episodes": 1}]
    assert info["prompts"]["count"] == 28  # each rotation asks its own text


def test_the_trained_prompts_are_the_training_episodes_prompts(
        taught: TeachResult, tiny_dir: Path, tmp_path: Path, smol_tokenizer: object) -> None:
    """``prompts.txt`` holds the key of every read-out's rendered context at the training
    seed (extracted here with the base, which may read that seed), no other; rebuilding the
    keys from ``teach.json`` gives the same set."""
    from belieflens.readouts.render import prompt_key
    from belieflens.train.teach import PROMPTS, trained_prompts

    path = belieflens.extract("coin-flip", out=tmp_path / "train.h5", model=tiny_dir,
                              params={"turns": 1}, episodes=1, seed=TRAIN_SEED_OFFSET)
    ds = belieflens.open_cache(path)
    keys = {prompt_key(str(p)) for p in ds["prompt"].values}
    assert trained_prompts(taught.path) == keys
    other = belieflens.extract("coin-flip", out=tmp_path / "held.h5", model=tiny_dir,
                               params={"turns": 1}, episodes=4, seed=0)
    held = {prompt_key(str(p)) for p in belieflens.open_cache(other)["prompt"].values}
    assert held & keys and held - keys  # turn 0 and one flip are shared; the other is not
    copy = tmp_path / "old-style"
    copy.mkdir()
    for f in taught.path.iterdir():
        if f.name != PROMPTS:
            (copy / f.name).write_bytes(f.read_bytes())
    assert trained_prompts(copy, smol_tokenizer) == keys
    with pytest.raises(ParameterError, match=r"no prompts\.txt"):
        trained_prompts(copy)


def test_a_mix_teaches_every_condition_at_its_own_seed(tiny_dir: Path,
                                                       tmp_path: Path) -> None:
    """Two conditions: each taught on its own seed; an adapter, by name or loaded, refuses to
    be read at either seed of its environment."""
    from belieflens.model.load import load

    mix = ({"sides": "random"}, {"prior": "stated", "summary": "off"})
    result = teach(config(tiny_dir, mix=mix, steps=1, batch=1), tmp_path / "mix")
    info = result.info
    assert [c["seed"] for c in info["conditions"]] == [TRAIN_SEED_OFFSET, TRAIN_SEED_OFFSET + 1]
    assert info["conditions"][0]["params"]["sides"] == "random"
    assert info["conditions"][1]["params"]["prior"] == "stated"
    assert info["training"]["trees"] == 8
    assert info["options"]["mix"] == [{"sides": "random"},
                                      {"prior": "stated", "summary": "off"}]
    loaded = load(str(result.path))
    for model in (str(result.path), loaded):
        for seed in (TRAIN_SEED_OFFSET, TRAIN_SEED_OFFSET + 1):
            with pytest.raises(ParameterError, match="was taught on the episodes of that seed"):
                belieflens.extract("coin-flip", out=tmp_path / "x.h5", model=model,
                                   params={"turns": 1, "sides": "heads-tails"}, episodes=1,
                                   seed=seed)
    assert not (tmp_path / "x.h5").exists()


def test_a_mix_keeps_the_fingerprint_of_a_run_without_one(tiny_dir: Path) -> None:
    assert config(tiny_dir).fingerprint() == config(tiny_dir, mix=()).fingerprint()
    assert config(tiny_dir).fingerprint() != config(tiny_dir, mix=({"turns": 2},)
                                                   ).fingerprint()


def test_the_adapter_round_trips_to_identical_readouts(taught: TeachResult, tiny_dir: Path,
                                                       smol_tokenizer: object,
                                                       tmp_path: Path) -> None:
    """Extraction with ``--model FOLDER`` (base + adapter, merged on load) equals extraction
    with the model as it was trained, bit for bit; and differs from the base's."""
    import copy

    merged = copy.deepcopy(taught.model).merge_and_unload()
    src = ModelSource("in-memory", "directory", tiny_dir, "in-memory")
    in_memory = bridge_from_hf(src, "cpu", "float32", merged, smol_tokenizer, "x", "", 0.0)
    kw: dict[str, object] = {"params": {"turns": 1}, "episodes": 1, "seed": 0}
    a = belieflens.extract("coin-flip", out=tmp_path / "a.h5", model=in_memory, **kw)  # type: ignore[arg-type]
    b = belieflens.extract("coin-flip", out=tmp_path / "b.h5", model=taught.path, **kw)  # type: ignore[arg-type]
    base = belieflens.extract("coin-flip", out=tmp_path / "c.h5", model=tiny_dir, **kw)  # type: ignore[arg-type]
    assert_same_data(a, b)
    ds, db = belieflens.open_cache(b), belieflens.open_cache(base)
    assert ds.attrs["model_source"] == "adapter"
    assert not np.array_equal(ds["option_logprob"].values, db["option_logprob"].values)


def test_resume_after_sigterm_equals_an_uninterrupted_run(tiny_dir: Path,
                                                          tmp_path: Path) -> None:
    cfg = config(tiny_dir, steps=4, batch=2)
    whole = teach(cfg, tmp_path / "whole")

    def kill_at_two(p: Progress) -> None:
        if p.step == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(InterruptedRunError, match="after step 2 of 4") as e:
        teach(cfg, tmp_path / "cut", on_step=kill_at_two)
    assert e.value.exit_code == 143
    assert (tmp_path / "cut" / CHECKPOINT).is_file()
    assert not (tmp_path / "cut" / "teach.json").exists()
    resumed = teach(cfg, tmp_path / "cut")
    assert resumed.resumed_from == 2
    a = load_file(str(whole.path / "adapter_model.safetensors"))
    b = load_file(str(resumed.path / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert whole.info["training"]["loss_curve"] == resumed.info["training"]["loss_curve"]
    again = teach(cfg, tmp_path / "cut")  # finished: returned as is
    assert again.model is None and again.info == resumed.info


def test_an_early_stopped_run_is_the_full_runs_snapshot(tiny_dir: Path,
                                                        tmp_path: Path) -> None:
    """``schedule`` above ``steps`` stops a run where the full schedule's snapshot of that
    step is, bit for bit (the learning rate and the trees of each step are the full run's)."""
    full = teach(config(tiny_dir, steps=4, batch=2), tmp_path / "full",
                 snapshots=tmp_path / "snaps", snapshot_every=2)
    early = teach(config(tiny_dir, steps=2, batch=2, schedule=4), tmp_path / "early")
    snap = load_file(str(tmp_path / "snaps" / "step-00002.safetensors"))
    saved = load_file(str(early.path / "adapter_model.safetensors"))
    assert sorted(k.replace(".default", "") for k in snap) == sorted(saved)
    assert all(np.array_equal(v, saved[k.replace(".default", "")]) for k, v in snap.items())
    assert early.info["options"]["schedule"] == 4 and early.info["training"]["steps"] == 2
    assert full.info["training"]["loss_curve"][:2] == early.info["training"]["loss_curve"]
    final = load_file(str(full.path / "adapter_model.safetensors"))
    assert not all(np.array_equal(final[k], saved[k]) for k in saved)


def test_another_environment_is_taught(tiny_dir: Path, tmp_path: Path) -> None:
    """Any environment with option-level oracles: dice (its stated-belief question)."""
    result = teach(config(tiny_dir, env="dice", env_params=(), steps=2, batch=1),
                   tmp_path / "dice")
    tr = result.info["training"]
    assert tr["readouts"] >= 1 and np.isfinite(tr["final_loss"])


def test_a_tempered_target_changes_the_adapter(tiny_dir: Path, tmp_path: Path,
                                               taught: TeachResult) -> None:
    result = teach(config(tiny_dir, temper=0.3), tmp_path / "tempered")
    assert result.info["target"] == "posterior with the evidence weighted by 0.3"
    assert result.info["training"]["loss_curve"] != taught.info["training"]["loss_curve"]


def test_weighing_by_question_changes_the_adapter(tiny_dir: Path, tmp_path: Path,
                                                  taught: TeachResult) -> None:
    result = teach(config(tiny_dir, weigh="question"), tmp_path / "question")
    assert result.info["options"]["weigh"] == "question"
    assert taught.info["options"]["weigh"] == "readout"
    assert result.info["training"]["loss_curve"] != taught.info["training"]["loss_curve"]
    with pytest.raises(ParameterError, match="'--weigh'"):
        config(tiny_dir, weigh="episode")


def test_a_step_loss_changes_the_adapter_and_leaves_the_kl_reported(
        tiny_dir: Path, tmp_path: Path, taught: TeachResult) -> None:
    """With a step loss the trees of turn 1 also learn their step from turn 0: the adapter
    changes from the second step on, while the first step's reported loss is still the KL
    alone; a default run's fingerprint does not name it."""
    result = teach(config(tiny_dir, step_loss=1.0), tmp_path / "steps")
    ours, theirs = (r.info["training"]["loss_curve"] for r in (result, taught))
    assert ours[0] == theirs[0] and ours[1:] != theirs[1:]
    assert result.info["options"]["step_loss"] == 1.0
    assert config(tiny_dir).fingerprint() == config(tiny_dir, step_loss=0.0).fingerprint()
    assert result.info["fingerprint"] != taught.info["fingerprint"]
    for bad in (-1.0, float("nan")):
        with pytest.raises(ParameterError, match="'--step-loss'"):
            config(tiny_dir, step_loss=bad)


def test_options_parse_and_schedule() -> None:
    assert parse_layers("2-4, 7") == (2, 3, 4, 7) and parse_layers("") == ()
    assert parse_temper("0.3") == 0.3
    for bad in ("0", "-1", "abc", "nan"):
        with pytest.raises(ParameterError, match="'--temper'"):
            parse_temper(bad)
    with pytest.raises(ParameterError, match="'--layers'"):
        parse_layers("a-b")
    cfg = TeachConfig(env="coin-flip", steps=10, batch=3, warmup=2, lr=1.0)
    assert learning_rate(cfg, 0) == 0.5 and learning_rate(cfg, 9) < learning_rate(cfg, 2)
    early = dataclasses.replace(cfg, steps=6, schedule=10)  # stops at step 6 of 10
    assert [learning_rate(early, k) for k in range(6)] == [learning_rate(cfg, k)
                                                           for k in range(6)]
    assert learning_rate(dataclasses.replace(cfg, steps=6), 5) < learning_rate(early, 5)
    assert early.fingerprint() != dataclasses.replace(early, schedule=0).fingerprint()
    for schedule in (5, -1, True):  # below steps, negative, not an integer
        with pytest.raises(ParameterError, match="'--schedule'"):
            dataclasses.replace(early, schedule=schedule)
    order = [i for s in range(4) for i in step_trees(cfg, 6, s)]
    assert sorted(order[:6]) == list(range(6)) and sorted(order[6:12]) == list(range(6))


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_adapters_are_their_recipes(name: str) -> None:
    """Each shipped adapter's ``teach.json`` records its recipe in ``SHIPPED`` (so ``make
    adapters`` leaves it as is and ``bench.teach_ship`` rebuilds that recipe), and a run that
    stopped at its recipe's last step."""
    info = json.loads((adapter_folder(name) / "teach.json").read_text())
    assert info["fingerprint"] == SHIPPED[name].fingerprint()
    assert info["training"]["steps"] == SHIPPED[name].steps


def test_an_experiments_steps_are_a_whole_run_unless_it_gives_a_schedule() -> None:
    """``bench.teach_ship --steps N`` rebuilds a whole N-step run (its decay spans its own
    steps); ``--schedule`` keeps a decay longer than the run (an early stop). The S = 0.3
    recipe is the S = 1 recipe with the evidence tempered and without the prior drills;
    ``--prior-drills N`` sets the drills (0: the first recipe's mix), ``--drill-turns`` their
    flips after the prior."""
    import argparse

    from bench.teach_ship import recipe

    def args(**given: object) -> argparse.Namespace:
        names = ("model", "episodes", "steps", "weigh", "batch", "rank", "lr", "schedule",
                 "layers", "stated_priors", "step_loss")
        return argparse.Namespace(**{n: given.get(n) for n in names},
                                  stated_copies=given.get("stated_copies", 1),
                                  stated_as=given.get("stated_as", "share"),
                                  prior_drills=given.get("prior_drills"),
                                  drill_turns=given.get("drill_turns", 1))

    name = "smollm2-135m-bayes-0.3"
    assert recipe(name, args()) == SHIPPED[name]
    assert SHIPPED[name] == dataclasses.replace(SHIPPED["smollm2-135m-bayes"], temper=0.3,
                                                mix=COIN_FLIP_MIX)
    assert recipe(name, args(prior_drills=PRIOR_DRILLS)).mix == SHIPPED["smollm2-135m-bayes"].mix
    short = recipe(name, args(steps=264))
    assert (short.steps, short.schedule) == (264, 0)
    stopped = recipe(name, args(steps=100, schedule=264))
    assert (stopped.steps, stopped.schedule) == (100, 264)
    assert recipe(name, args(step_loss=1.0)).step_loss == 1.0
    assert recipe(name, args(episodes=48)).schedule == SHIPPED[name].schedule
    assert SHIPPED["smollm2-135m-bayes"].mix == COIN_FLIP_MIX + prior_drills(PRIOR_DRILLS)
    first = recipe("smollm2-135m-bayes", args(prior_drills=0))
    assert first == dataclasses.replace(SHIPPED[name], temper=1.0)
    heavy = recipe(name, args(stated_copies=3, stated_priors="0.15,0.85/1,10", prior_drills=0))
    stated = [dict(c) for c in heavy.mix if dict(c)["prior"] == "stated"]
    unstated = [c for c in heavy.mix if dict(c)["prior"] != "stated"]
    assert len(stated) == 3 * len(unstated) == 60
    assert {(c["prior_means"], c["prior_weights"]) for c in stated} == {("0.15,0.85", "1,10")}
    seeds = {c.seed for c in heavy.conditions()}
    assert len(seeds) == len(heavy.mix)  # each copy at its own seed
    counts = recipe(name, args(stated_as="counts"))
    told = [dict(c) for c in counts.mix]
    assert len(told) == len(SHIPPED[name].mix)  # the drills told in counts too
    assert all(c.get("stated_as") == ("counts" if c["prior"] == "stated" else None)
               for c in told)
    drilled = recipe(name, args(prior_drills=4))
    drills = [dict(c) for c in drilled.mix[len(COIN_FLIP_MIX):]]
    assert drilled.mix[: len(COIN_FLIP_MIX)] == COIN_FLIP_MIX
    assert [(c["prior"], c["turns"], c["sides"]) for c in drills] == [
        ("stated", 1, "heads-tails"), ("stated", 1, "random")] * 2
    assert len({c.seed for c in drilled.conditions()}) == len(drilled.mix)
    longer = recipe("smollm2-135m-bayes", args(drill_turns=3))
    assert longer.mix[: len(COIN_FLIP_MIX)] == COIN_FLIP_MIX
    assert [dict(c)["turns"] for c in longer.mix[len(COIN_FLIP_MIX):]] == [3] * PRIOR_DRILLS


def test_two_loss_curves_of_one_run_logged_over_different_windows_agree() -> None:
    """``bench.teach_losses`` compares runs logged every 3 and every 5 steps over windows of
    15, leaving out a partial last window; the shipped adapters are different runs."""
    from bench.teach_losses import common_windows, curve

    losses = np.random.default_rng(0).random(200)

    def logged(every: int, steps: int) -> tuple[int, int, np.ndarray]:
        return steps, every, np.array([losses[i:min(i + every, steps)].mean()
                                       for i in range(0, steps, every)])

    window, a, b = common_windows(logged(3, 200), logged(5, 196))
    assert window == 15 and a.size == 13
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, losses[:195].reshape(13, 15).mean(axis=1), atol=1e-12)
    window, a, _ = common_windows(logged(3, 200), logged(5, 196), 30)
    assert window == 30 and a.size == 6
    np.testing.assert_allclose(a, losses[:180].reshape(6, 30).mean(axis=1), atol=1e-12)
    with pytest.raises(SystemExit, match="not a multiple of 15"):
        common_windows(logged(3, 200), logged(5, 196), 20)
    _, s1, s03 = common_windows(curve(adapter_folder("smollm2-135m-bayes")),
                                curve(adapter_folder("smollm2-135m-bayes-0.3")))
    assert np.abs(s1 - s03).max() > 0.01
