"""Token-level environments through the cache: episodes are the process's sequences, queries
go in as ids, the file holds the oracle and the hidden-state belief, and a text environment on
a toy (or a token environment on a vocabulary without the symbols) is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from transformers import PreTrainedTokenizerBase

import belieflens
from belieflens.envs.tokens.named import mess3_tensor
from belieflens.episodes.base import Query
from belieflens.errors import BeliefLensError, ParameterError
from belieflens.model.load import LoadedModel, load, resolve
from belieflens.readouts.render import render
from belieflens.train.toy import TOYS, ToyConfig, train

TINY = ToyConfig(process="mess3", params=(("length", 4),), n_layer=2, d_model=16, n_head=2,
                 d_mlp=32, steps=4, batch=8, lr=1e-2, warmup=1, checkpoint_every=4, seed=1)


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    out = tmp_path_factory.mktemp("toy") / "mess3"
    train(TINY, out, threads=1, progress=False)
    return load(str(out))


@pytest.mark.parametrize("name", ["coin-tokens", "mess3", "rrxor", "z1r"])
def test_episodes_are_the_process_sequences(name: str) -> None:
    env = belieflens.envs.get(name, length=5)
    proc = env.process  # type: ignore[attr-defined]
    eps = list(env.episodes(3, seed=7))
    draw = proc.sample(3, 7)
    for ep, tokens in zip(eps, draw.tokens, strict=True):
        assert len(ep.turns) == 6
        words = [proc.symbols[int(t)] for t in tokens]
        beliefs = proc.beliefs(tokens[None])[0]
        for t, turn in enumerate(ep.turns):
            (probe,) = turn.probes
            assert probe.queries[0].prefill == " ".join(words[:t])
            assert probe.queries[0].format == "tokens"
            assert probe.state is not None and np.allclose(probe.state, beliefs[t])
            assert probe.oracle is not None and abs(sum(probe.oracle) - 1) < 1e-9
    # episode i is the same in any shard: drawn from the middle, equal
    assert list(env.episodes(3, seed=7))[2] == eps[2]


def test_tokens_render_as_ids_and_a_vocabulary_without_the_symbol_is_refused(
    toy: LoadedModel, smol_tokenizer: PreTrainedTokenizerBase,
) -> None:
    q = Query((), "2 0 1", ("0", "1", "2"), (0, 1, 2), format="tokens")
    tq = render(toy.tokenizer, q)
    assert tq.context_ids == (3, 2, 0, 1) and tq.option_ids == ((0,), (1,), (2,))
    odd = Query((), "qzxj_not_a_token", ("0", "1"), (0, 1), format="tokens")
    with pytest.raises(BeliefLensError, match="cannot hold the symbol 'qzxj_not_a_token'"):
        render(smol_tokenizer, odd)
    tq2 = render(smol_tokenizer, Query((), "1 0", ("0", "1"), (0, 1), format="tokens"))
    assert tq2.context_ids[0] == smol_tokenizer.bos_token_id and len(tq2.context_ids) == 3


def test_extract_stores_oracle_belief_and_the_toys_next_token(toy: LoadedModel,
                                                             tmp_path: Path) -> None:
    import torch

    env = belieflens.envs.get("mess3", length=4)
    out = belieflens.extract(env, out=tmp_path / "m.h5", model=toy, episodes=6, seed=2)
    ds = belieflens.open_cache(out)
    assert ds.sizes["query"] == 6 * 5 and list(ds.state_label.values) == ["A", "B", "C"]
    proc = env.process  # type: ignore[attr-defined]
    tokens = proc.sample(6, 2).tokens
    assert np.allclose(ds.belief_state.values.reshape(6, 5, 3), proc.beliefs(tokens))
    assert np.allclose(ds.oracle.values.reshape(6, 5, 3), proc.next_token(tokens))
    ids = torch.tensor(np.concatenate([np.full((6, 1), 3), tokens], axis=1))
    with torch.no_grad():
        logp = torch.log_softmax(toy.bridge.original_model(ids).logits, -1)[..., :3].numpy()
    assert np.allclose(ds.option_logprob.values.reshape(6, 5, 3), logp, atol=1e-4)


def test_a_text_environment_on_a_toy_is_one_line_and_writes_nothing(
    toy: LoadedModel, tmp_path: Path
) -> None:
    with pytest.raises(ParameterError, match="is a text environment"):
        belieflens.extract(belieflens.envs.get("coin-flip", turns=2), out=tmp_path / "c.h5",
                           model=toy, episodes=1)
    assert not list(tmp_path.iterdir())


def test_a_bad_transition_tensor_and_an_unknown_process_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    neg = mess3_tensor(0.05, 0.85)
    neg[0, 0, 0] = -0.1
    bad.write_text(json.dumps(neg.tolist()))
    with pytest.raises(ParameterError, match="negative"):
        belieflens.envs.get("hmm", path=str(bad))
    with pytest.raises(ParameterError, match="unknown environment 'mess4'"):
        belieflens.envs.get("mess4")


def test_toy_names_resolve_to_the_package_folders() -> None:
    for name in TOYS:
        try:
            src = resolve(name)
        except belieflens.errors.ModelNotFoundError as e:
            assert "python -m bench.toy_ship" in str(e)
            continue
        assert src.kind == "toy" and (src.path / "toy.json").is_file()


def test_patching_between_sequences_moves_the_output_to_the_source(
    toy: LoadedModel, tmp_path: Path
) -> None:
    """At the last layer, the answer position's residual is the whole output: patching it
    from another sequence gives that sequence's next-token distribution; at layer 0 with
    every differing token patched, the source's too (the rest of the context is shared)."""
    import xarray as xr

    env = belieflens.envs.get("mess3", length=4)
    study = belieflens.extract(env, out=tmp_path / "m.h5", model=toy, episodes=6, seed=2)
    out = belieflens.patch(
        study, out=tmp_path / "p.h5", model=toy,
        # the default path: at layer L no block runs, and the patched residual (not GPT-2's
        # input embeddings plus position embeddings) must reach the final norm
        options=belieflens.PatchOptions(layers=(0, 2), positions=("answer", "evidence")),
        select=belieflens.Selection(turns=(3,)))
    with xr.open_dataset(out, engine="h5netcdf") as res:
        assert res.sizes["pair"] > 0
        last = res.patched_logprob.sel(layer=2, positions="answer").values
        assert np.allclose(last, res.source_logprob.values, atol=1e-4)
        first = res.patched_logprob.sel(layer=0, positions="evidence").values
        assert np.allclose(first, res.source_logprob.values, atol=1e-4)

