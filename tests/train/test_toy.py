"""The toy trainer: the fast forward equals transformers', training is seeded and resumable
bit for bit, the folder reloads in transformers with a tokenizer over the symbols, and the
shipped mess3-toy predicts near the optimum."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from belieflens.errors import ParameterError
from belieflens.train.toy import (
    BOS,
    CHECKPOINT,
    INFO_FILE,
    TOYS,
    Progress,
    Targets,
    ToyConfig,
    build_model,
    build_tokenizer,
    fast_logits,
    future_distribution,
    learning_rate,
    load_toy,
    make_process,
    residuals,
    toy_dir,
    train,
    training_batch,
    with_bos,
)

TINY = ToyConfig(process="mess3", params=(("length", 5),), n_layer=2, d_model=16, n_head=2,
                 d_mlp=32, steps=8, batch=16, lr=1e-2, warmup=2, checkpoint_every=2, seed=3)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("n_head", [1, 2, 4])
def test_fast_logits_equal_the_module(n_head: int) -> None:
    cfg = dataclasses.replace(TINY, n_head=n_head, seed=n_head)
    model = build_model(cfg)
    with torch.no_grad():  # random weights far from init: perturb the LayerNorms too
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    inputs, _ = training_batch(make_process(cfg), cfg, 0)
    ids = torch.from_numpy(inputs)
    with torch.no_grad():
        assert torch.allclose(fast_logits(model, ids), model(input_ids=ids).logits, atol=1e-5)


def test_batches_and_inputs() -> None:
    proc = make_process(TINY)
    inputs, targets = training_batch(proc, TINY, 5)
    assert inputs.shape == (16, 6) and targets.shape == (16, 6)
    assert (inputs[:, 0] == 3).all() and np.array_equal(inputs[:, 1:], targets[:, :-1])
    again, _ = training_batch(proc, TINY, 5)
    assert np.array_equal(inputs, again)
    other, _ = training_batch(proc, TINY, 6)
    assert not np.array_equal(inputs, other)
    soft = dataclasses.replace(TINY, targets="oracle")
    i2, dist = training_batch(proc, soft, 5)
    assert np.array_equal(i2, inputs) and dist.shape == (16, 6, 3)
    assert np.allclose(dist, proc.next_token(targets[:, :-1]), atol=1e-6)


def test_same_seed_same_weights_and_another_seed_differs(tmp_path: Path) -> None:
    seen: list[Progress] = []
    r1 = train(TINY, tmp_path / "a", progress=False, on_step=seen.append)
    r2 = train(TINY, tmp_path / "b", progress=True)
    r3 = train(dataclasses.replace(TINY, seed=4), tmp_path / "c", progress=False)
    assert [p.step for p in seen] == list(range(1, 9))
    assert all(p.optimal == pytest.approx(seen[0].optimal) for p in seen)
    assert _same(_weights(r1.path), _weights(r2.path))
    assert not _same(_weights(r1.path), _weights(r3.path))
    assert not (r1.path / CHECKPOINT).exists()


@pytest.mark.parametrize(("targets", "horizon"), [("sampled", 1), ("oracle", 1), ("oracle", 3)])
def test_resume_equals_uninterrupted(tmp_path: Path, targets: Targets, horizon: int) -> None:
    cfg = dataclasses.replace(TINY, targets=targets, horizon=horizon)
    whole = train(cfg, tmp_path / "whole", progress=False)
    train(cfg, tmp_path / "part", progress=False, stop_after=3)
    assert (tmp_path / "part" / CHECKPOINT).exists()
    assert not (tmp_path / "part" / INFO_FILE).exists()
    train(cfg, tmp_path / "part", progress=False, stop_after=2)  # killed again
    done = train(cfg, tmp_path / "part", progress=False)
    assert done.resumed_from == 5
    assert _same(_weights(whole.path), _weights(done.path))
    assert not (tmp_path / "part" / CHECKPOINT).exists()
    info = json.loads((tmp_path / "part" / INFO_FILE).read_text())
    assert info["training"]["resumed_from"] == 5
    # a finished folder of the same configuration is returned untouched
    again = train(cfg, tmp_path / "part", progress=False)
    assert again.seconds == 0.0 and _same(_weights(again.path), _weights(done.path))


def test_other_configurations_are_refused_unless_overwrite(tmp_path: Path) -> None:
    train(TINY, tmp_path / "t", progress=False, stop_after=2)
    other = dataclasses.replace(TINY, lr=2e-2)
    with pytest.raises(ParameterError, match="another configuration"):
        train(other, tmp_path / "t", progress=False)
    r = train(other, tmp_path / "t", progress=False, overwrite=True)
    assert r.resumed_from == 0
    with pytest.raises(ParameterError, match="not empty"):
        train(TINY, tmp_path / "t", progress=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ParameterError, match="is a file"):
        train(TINY, tmp_path / "file", progress=False)


def test_saved_folder_reloads_in_transformers(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result = train(TINY, tmp_path / "toy", progress=False)
    folder = result.path
    assert {"config.json", "model.safetensors", "tokenizer.json", INFO_FILE} <= {
        p.name for p in folder.iterdir()}
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert type(model).__name__ == "GPT2LMHeadModel"
    assert model.config.n_positions == 6 and model.config.activation_function == "relu"
    # the tokenizer maps symbol i to id i and prepends <bos>; decoding round-trips
    text = "0 2 1 1 0"
    ids = tok(text)["input_ids"]
    assert ids == [3, 0, 2, 1, 1, 0]
    assert tok.bos_token == BOS and tok.convert_tokens_to_ids(BOS) == 3
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.convert_ids_to_tokens([0, 1, 2]) == ["0", "1", "2"]
    toy = load_toy(folder)
    assert toy.process.name == "mess3" and toy.info["process_params"]["length"] == 5
    assert toy.info["fingerprint"] == TINY.fingerprint()
    assert ToyConfig.from_dict(toy.info["config"]) == TINY
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.allclose(model(input_ids=x).logits, toy.model(input_ids=x).logits)
    # residuals: belieflens's layers; the last is before the final LayerNorm
    resid, logp = residuals(toy.model, np.array([ids]))
    assert resid.shape == (3, 1, 6, 16) and logp.shape == (1, 6, 5)
    with torch.no_grad():
        hs = toy.model(input_ids=x, output_hidden_states=True).hidden_states
        assert np.allclose(resid[0], hs[0].numpy()) and np.allclose(resid[1], hs[1].numpy())
        final = toy.model.transformer.ln_f(torch.from_numpy(resid[2]))
        assert np.allclose(final.numpy(), hs[2].numpy(), atol=1e-5)


def test_tokenizer_maps_unknown_words_to_unk() -> None:
    tok = build_tokenizer(("H", "T"))
    assert tok("H T T")["input_ids"] == [2, 0, 1, 1]
    assert tok("H X")["input_ids"] == [2, 0, 3]
    assert tok.unk_token == "<unk>" and len(tok) == 4


def test_future_distribution_is_the_joint_of_the_next_tokens() -> None:
    proc = make_process(TOYS["rrxor-toy"])
    tokens = proc.sample(64, seed=5).tokens
    one = future_distribution(proc, tokens, 1)
    assert np.allclose(one, proc.next_token(tokens))
    three = future_distribution(proc, tokens, 3)  # word = 4 x_1 + 2 x_2 + x_3
    assert three.shape == (64, tokens.shape[1] + 1, 8)
    assert np.allclose(three.sum(-1), 1.0)
    assert np.allclose(three.reshape(64, -1, 2, 4).sum(-1), one)  # first-token marginal
    # P(x_1, x_2 | prefix) = P(x_1 | prefix) P(x_2 | prefix, x_1): the chain rule
    two = future_distribution(proc, tokens[:, :-1], 2).reshape(64, -1, 2, 2)
    t = tokens.shape[1] - 1
    nxt = proc.next_token(tokens)
    first = tokens[:, t]
    rows = np.arange(64)
    assert np.allclose(two[rows, t, first] / nxt[rows, t, first][:, None],
                       nxt[:, t + 1])
    with pytest.raises(ParameterError, match="hidden Markov"):
        future_distribution(make_process(TOYS["coin-toy"]), tokens[:, :3], 2)


def test_rrxor_belief_is_linear_in_the_next_four_tokens_not_three() -> None:
    # why rrxor-toy trains with horizon 4: the fewest next tokens whose joint distribution
    # determines the belief over its 5 states (the future map's rank is 2, 3, 4, 5 for 1..4)
    proc = make_process(TOYS["rrxor-toy"])
    tokens = proc.sample(300, seed=2).tokens
    belief = proc.beliefs(tokens).reshape(-1, 5)

    def residual(horizon: int) -> float:
        f = future_distribution(proc, tokens, horizon).reshape(len(belief), -1)
        x = np.hstack([f, np.ones((len(f), 1))])
        fit = x @ np.linalg.lstsq(x, belief, rcond=None)[0]
        return float(np.abs(fit - belief).max())

    assert residual(4) < 1e-8
    assert residual(3) > 0.05
    ranks = [np.linalg.matrix_rank(future_distribution(proc, tokens, k).reshape(len(belief), -1),
                                   tol=1e-9) for k in (1, 2, 3, 4)]
    assert ranks == [2, 3, 4, 5]
    assert TOYS["rrxor-toy"].horizon == 4
    shipped = json.loads((toy_dir("rrxor-toy") / INFO_FILE).read_text())
    assert shipped["fingerprint"] == TOYS["rrxor-toy"].fingerprint()


def test_horizon_needs_oracle_targets_of_a_hidden_markov_process() -> None:
    with pytest.raises(ParameterError, match="horizon"):
        dataclasses.replace(TINY, horizon=2)  # sampled targets
    with pytest.raises(ParameterError, match="horizon"):
        dataclasses.replace(TOYS["coin-toy"], targets="oracle", horizon=2)
    with pytest.raises(ParameterError, match="horizon"):
        dataclasses.replace(TINY, targets="oracle", horizon=9)
    # the default is left out of the fingerprint: toys trained before it keep theirs
    assert "horizon" not in TINY.as_dict()
    deep = dataclasses.replace(TINY, targets="oracle", horizon=2)
    assert ToyConfig.from_dict(deep.as_dict()) == deep
    assert deep.fingerprint() != dataclasses.replace(TINY, targets="oracle").fingerprint()
    shipped = json.loads((toy_dir("coin-toy") / INFO_FILE).read_text())
    assert shipped["fingerprint"] == TOYS["coin-toy"].fingerprint()


def test_config_and_schedule() -> None:
    for bad in ({"n_head": 3}, {"steps": 0}, {"lr": 0.0}, {"schedule": "linear"},
                {"targets": "soft"}, {"process": "mess4"}, {"params": (("x", 0.7),)}):
        with pytest.raises(ParameterError):
            dataclasses.replace(TINY, **bad)
    cfg = dataclasses.replace(TINY, steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert learning_rate(cfg, 0) == pytest.approx(0.1)
    assert learning_rate(cfg, 9) == pytest.approx(1.0)
    assert learning_rate(cfg, 10) == pytest.approx(1.0)
    assert learning_rate(cfg, 99) == pytest.approx(0.1, abs=1e-3)
    assert set(TOYS) == {"coin-toy", "mess3-toy", "rrxor-toy"}
    with pytest.raises(ParameterError, match="unknown toy"):
        toy_dir("mess4-toy")  # type: ignore[arg-type]


@pytest.mark.slow
def test_shipped_mess3_toy_is_near_optimal() -> None:
    """On 2,000 held-out sequences, the expected cross-entropy of the model's next-token
    distribution under the oracle's (so only the prefixes are sampled) is within 1% of the
    optimum at every position >= 2."""
    toy = load_toy("mess3-toy")
    proc = toy.process
    tokens = proc.sample(2000, seed=987_654).tokens
    _, logp = residuals(toy.model, with_bos(tokens, toy.bos_id))
    q = proc.next_token(tokens)  # [episode, turn, symbol]
    ce = -(q * logp[..., :3]).sum(-1).mean(0)
    opt = -(q * np.log(q)).sum(-1).mean(0)
    assert ce.shape == (proc.length + 1,)
    assert np.all(ce[2:] <= 1.01 * opt[2:]), (ce / opt - 1)
    assert toy_dir("mess3-toy").joinpath(INFO_FILE).is_file()


def test_optimal_cross_entropy_falls_back_to_an_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    from belieflens.train.toy import optimal_per_position

    proc = make_process(TINY)
    exact = optimal_per_position(proc)
    assert exact.shape == (6,)

    def too_big(length: int | None = None) -> np.ndarray:
        raise ParameterError("too many rows")

    monkeypatch.setattr(proc, "optimal_cross_entropy", too_big)
    estimate = optimal_per_position(proc, samples=20_000)
    assert np.allclose(estimate, exact, atol=0.01)


def test_params_are_normalised() -> None:
    a = ToyConfig(process="mess3", params={"x": 0.1, "length": 4})  # type: ignore[arg-type]
    b = ToyConfig(process="mess3", params=(("length", 4), ("x", 0.1)))
    assert a == b and a.fingerprint() == b.fingerprint()
    assert ToyConfig.from_dict(a.as_dict()) == a
