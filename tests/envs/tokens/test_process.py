"""Token-level processes: exact oracles (beliefs, next tokens, cross-entropy, enumeration),
seeded sampling, and one line for every bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from belieflens.envs.tokens import process as P
from belieflens.envs.tokens.coin import CoinTokens
from belieflens.envs.tokens.named import HMMProcess, mess3_tensor, rrxor_tensor
from belieflens.errors import ParameterError

HMM_NAMES = ("mess3", "rrxor", "z1r")


def _params(draw: st.DrawFn, name: str) -> dict[str, Any]:
    open01 = st.floats(0.05, 0.95)
    if name == "coin-tokens":
        return {"a": draw(st.floats(0.2, 8.0)), "b": draw(st.floats(0.2, 8.0)),
                "bins": draw(st.integers(2, 20))}
    if name == "mess3":
        return {"x": draw(st.floats(0.01, 0.45)), "alpha": draw(open01)}
    if name == "rrxor":
        return {"p1": draw(open01), "p2": draw(open01)}
    return {"p": draw(open01)}


@st.composite
def processes(draw: st.DrawFn, names: tuple[str, ...] = ("coin-tokens", *HMM_NAMES)
              ) -> P.TokenProcess:
    name = draw(st.sampled_from(names))
    return P.get(name, **_params(draw, name), length=draw(st.integers(1, 12)))


# ------------------------------------------------------------------------------ oracles
@given(proc=processes(), seed=st.integers(0, 2**32), n=st.integers(1, 6))
@settings(max_examples=60, deadline=None)
def test_beliefs_and_next_tokens_are_distributions(proc: P.TokenProcess, seed: int,
                                                   n: int) -> None:
    tokens = proc.sample(n, seed).tokens
    assert tokens.shape == (n, proc.length)
    b = proc.beliefs(tokens)
    q = proc.next_token(tokens)
    assert b.shape == (n, proc.length + 1, len(proc.states))
    assert q.shape == (n, proc.length + 1, len(proc.symbols))
    assert (b >= 0).all() and np.allclose(b.sum(-1), 1.0, atol=1e-9)
    assert (q >= 0).all() and np.allclose(q.sum(-1), 1.0, atol=1e-9)


@given(proc=processes(HMM_NAMES), seed=st.integers(0, 2**32))
@settings(max_examples=40, deadline=None)
def test_next_token_is_belief_times_emission(proc: P.TokenProcess, seed: int) -> None:
    assert isinstance(proc, HMMProcess)
    tokens = proc.sample(4, seed).tokens
    emission = proc.hmm.transition.sum(axis=2).T  # [state, symbol]
    assert np.allclose(proc.next_token(tokens), proc.beliefs(tokens) @ emission, atol=1e-12)
    # and the belief is the normalised forward product pi T[x_1] ... T[x_t]
    b = proc.hmm.pi.copy()
    for t, x in enumerate(tokens[0]):
        assert np.allclose(proc.beliefs(tokens)[0, t], b)
        b = b @ proc.hmm.transition[x]
        b /= b.sum()


@given(proc=processes(), length=st.integers(0, 8))
@settings(max_examples=40, deadline=None)
def test_enumeration_sums_to_one_and_matches_log_prob(proc: P.TokenProcess,
                                                      length: int) -> None:
    e = proc.enumerate_sequences(length)
    assert e.tokens.shape[1] == length
    assert e.prob.sum() == pytest.approx(1.0, abs=1e-12)
    assert (e.prob > 0).all()
    assert len({tuple(r) for r in e.tokens.tolist()}) == len(e.tokens)
    if length:
        logp = proc.log_prob(e.tokens)
        assert np.allclose(np.exp(logp), e.prob, rtol=1e-10)


@given(proc=processes(), depth=st.integers(0, 7))
@settings(max_examples=40, deadline=None)
def test_mixed_states_are_a_martingale_summing_to_one(proc: P.TokenProcess,
                                                      depth: int) -> None:
    levels = proc.mixed_states(depth)
    assert [lv.depth for lv in levels] == list(range(depth + 1))
    prior = levels[0].beliefs[0]
    for lv in levels:
        assert lv.prob.sum() == pytest.approx(1.0, abs=1e-12)
        # the expected belief is the prior at every depth (a stationary start)
        assert np.allclose(lv.prob @ lv.beliefs, prior, atol=1e-9)
        assert lv.paths.shape == (len(lv.prob), lv.depth)
        # each row's representative path leads to its belief
        if lv.depth:
            assert np.allclose(proc.beliefs(lv.paths)[:, -1], lv.beliefs, atol=1e-9)
    # rows count the sequences they merge
    if depth:
        assert levels[-1].multiplicity.sum() == len(proc.enumerate_sequences(depth).prob)


@pytest.mark.parametrize("name", ["coin-tokens", *HMM_NAMES])
def test_sampled_frequencies_match_the_enumeration(name: str) -> None:
    proc = P.get(name, length=4)
    e = proc.enumerate_sequences()
    n = 20_000
    draws = proc.sample_batch(n, np.random.default_rng(7)).tokens
    index = {tuple(r): i for i, r in enumerate(e.tokens.tolist())}
    counts = np.zeros(len(e.prob))
    for r in draws.tolist():
        counts[index[tuple(r)]] += 1  # a KeyError here: a sampled sequence of probability 0
    se = np.sqrt(e.prob * (1 - e.prob) / n)
    assert np.all(np.abs(counts / n - e.prob) < 5 * se + 1e-4)
    # chi-square goodness of fit of the per-episode sampler too
    per_episode = proc.sample(4000, seed=3).tokens
    c2 = np.zeros(len(e.prob))
    for r in per_episode.tolist():
        c2[index[tuple(r)]] += 1
    big = e.prob * 4000 >= 5
    chi = stats.chisquare(c2[big], e.prob[big] / e.prob[big].sum() * c2[big].sum())
    assert chi.pvalue > 1e-4


@pytest.mark.parametrize("name", ["coin-tokens", *HMM_NAMES])
def test_cross_entropy_decreases_to_the_entropy_rate(name: str) -> None:
    proc = P.get(name)
    rate = proc.entropy_rate()
    ce = proc.optimal_cross_entropy(12)
    assert ce.shape == (12,)
    assert np.all(np.diff(ce) <= 1e-12)  # H(X_t | X_<t) never grows for a stationary process
    assert np.all(ce >= rate - 1e-6)
    if name == "coin-tokens":
        long = proc.optimal_cross_entropy(400)
        assert 0 < long[-1] - rate < 2e-3  # O(1/t) convergence to E[h(theta)]
    else:
        assert isinstance(proc, HMMProcess)
        lo, hi = proc.hmm.entropy_rate_bounds()
        assert lo <= rate <= hi and hi - lo < 1e-6
        assert rate - lo < 3e-7
        # mess3's mixed states never merge (3**t of them): 12 positions are its practical reach
        far = 12 if name == "mess3" else 60
        assert proc.optimal_cross_entropy(far)[-1] - rate < 1e-5


def test_known_entropy_rates_and_stationary_distributions() -> None:
    for name, exact in (("rrxor", 2 / 3 * np.log(2)), ("z1r", np.log(2) / 3)):
        proc = P.get(name)
        assert isinstance(proc, HMMProcess)
        lo, hi = proc.hmm.entropy_rate_bounds()
        assert lo - 1e-12 <= exact <= hi + 1e-12 and hi - lo <= 1e-8
        assert proc.entropy_rate() == pytest.approx(exact, abs=1e-8)
    assert P.get("coin-tokens").entropy_rate() == pytest.approx(0.5, abs=1e-12)
    rr = P.get("rrxor")
    assert isinstance(rr, HMMProcess)
    assert np.allclose(rr.hmm.pi, [1 / 3, 1 / 6, 1 / 6, 1 / 6, 1 / 6])
    m3 = P.get("mess3")
    assert isinstance(m3, HMMProcess)
    assert np.allclose(m3.hmm.pi, 1 / 3)
    # CE of the first token of mess3 is log 3 (uniform), then drops
    assert m3.optimal_cross_entropy(2)[0] == pytest.approx(np.log(3))


def test_tensors_are_the_papers() -> None:
    """Spot values of epsilon-transformers' Mess3 (x, a) and RRXOR definitions."""
    t = mess3_tensor(0.05, 0.85)
    b, y = 0.075, 0.9
    assert t[0, 0, 0] == pytest.approx(0.85 * y)
    assert t[1, 0, 1] == pytest.approx(0.85 * 0.05)
    assert t[2, 2, 2] == pytest.approx(0.85 * y)
    assert t[0, 1, 1] == pytest.approx(b * y)
    r = rrxor_tensor(0.5, 0.5)
    assert r[0, 0, 1] == 0.5 and r[1, 3, 0] == 1.0 and r[0, 4, 0] == 1.0


# ------------------------------------------------------------------------------ the coin
@given(a=st.floats(0.2, 10), b=st.floats(0.2, 10), bins=st.integers(2, 12),
       seed=st.integers(0, 2**32))
@settings(max_examples=40, deadline=None)
def test_coin_posterior_is_the_closed_form(a: float, b: float, bins: int, seed: int) -> None:
    proc = P.get("coin-tokens", a=a, b=b, length=9, bins=bins)
    assert isinstance(proc, CoinTokens)
    tokens = proc.sample(3, seed).tokens
    belief = proc.beliefs(tokens)
    mean = proc.posterior_mean(tokens)
    edges = np.linspace(0, 1, bins + 1)
    for i in range(3):
        for t in range(10):
            h = int((tokens[i, :t] == 0).sum())
            post = stats.beta(a + h, b + t - h)
            assert np.allclose(belief[i, t], np.diff(post.cdf(edges)), atol=1e-10)
            assert mean[i, t] == pytest.approx(post.mean())
            assert proc.next_token(tokens)[i, t, 0] == pytest.approx(post.mean())


def test_coin_oracles_match_coin_flip_and_its_episodes() -> None:
    from belieflens.envs.coin_flip.env import (
        CoinFlip,
        CoinFlipParams,
        bias_oracle,
        next_flip_oracle,
    )

    proc = P.get("coin-tokens", a=2.0, b=3.0, length=10, bins=5)
    assert isinstance(proc, CoinTokens)
    draw = proc.sample(6, seed=11)
    env = CoinFlip(CoinFlipParams(a0=2.0, b0=3.0, turns=10, bins=5, delivery="single-turn"))
    for i, ep in enumerate(env.episodes(6, seed=11)):
        assert ep.truth["theta"] == pytest.approx(draw.truth["theta"][i])
        heads = (draw.tokens[i] == 0).astype(int)
        flips = [1 if o == "heads" else 0 for t in ep.turns[1:] for o in [t.observation]]
        assert flips == heads.tolist()
        for t in range(11):
            h = int(heads[:t].sum())
            assert np.allclose(proc.next_token(draw.tokens)[i, t], next_flip_oracle(2, 3, h, t))
            assert np.allclose(proc.beliefs(draw.tokens)[i, t], bias_oracle(2, 3, h, t, 5))


def test_coin_mixed_states_are_beta_binomial() -> None:
    proc = P.get("coin-tokens", a=1.5, b=0.7, length=32)
    levels = proc.mixed_states(32)
    last = levels[-1]
    assert np.allclose(last.prob, stats.betabinom(32, 1.5, 0.7).pmf(np.arange(33)))
    assert last.multiplicity.tolist() == [int(special.comb(32, h, exact=True))
                                          for h in range(33)]
    # exact CE by count equals the CE by enumerating every sequence where that is possible
    short = P.get("coin-tokens", a=1.5, b=0.7, length=10)
    e = short.enumerate_sequences()
    q = short.next_token(e.tokens)[:, :-1]
    p_true = np.take_along_axis(q, e.tokens[..., None], axis=-1)[..., 0]
    ce_enum = -(e.prob[:, None] * np.log(p_true)).sum(axis=0)
    assert np.allclose(ce_enum, short.optimal_cross_entropy(), atol=1e-12)


# ------------------------------------------------------------------------------ sampling
@given(proc=processes(), seed=st.integers(0, 2**40), start=st.integers(0, 50))
@settings(max_examples=30, deadline=None)
def test_episode_i_of_seed_s_is_the_same_in_any_shard(proc: P.TokenProcess, seed: int,
                                                      start: int) -> None:
    whole = proc.sample(start + 5, seed).tokens
    shard = proc.sample(5, seed, start=start).tokens
    assert np.array_equal(whole[start:], shard)
    assert np.array_equal(proc.sample(1, seed, start=start + 2).tokens[0], whole[start + 2])


@pytest.mark.parametrize("name", HMM_NAMES)
def test_hidden_paths_are_consistent_with_the_tokens(name: str) -> None:
    proc = P.get(name, length=15)
    assert isinstance(proc, HMMProcess)
    d = proc.sample(200, seed=1)
    s = d.truth["state"]
    t = proc.hmm.transition
    assert s.shape == (200, 16)
    assert (t[d.tokens, s[:, :-1], s[:, 1:]] > 0).all()
    same = proc.sample_batch(50, np.random.default_rng(5)).tokens
    assert np.array_equal(same, proc.sample_batch(50, np.random.default_rng(5)).tokens)


# ------------------------------------------------------------------------------ files
def test_hmm_default_is_the_packaged_golden_mean() -> None:
    proc = P.get("hmm", length=200)
    tokens = proc.sample(20, 0).tokens
    assert proc.states == ("A", "B") and tokens.shape == (20, 200)
    assert not ((tokens[:, 1:] == 0) & (tokens[:, :-1] == 0)).any()  # no two 0s in a row


def test_hmm_from_npz_and_json(tmp_path: Path) -> None:
    t = mess3_tensor(0.05, 0.85)
    np.savez(tmp_path / "m.npz", T=t, symbols=np.array(["a", "b", "c"]))
    (tmp_path / "m.json").write_text(json.dumps({"T": t.tolist(), "states": ["x", "y", "z"]}))
    (tmp_path / "bare.json").write_text(json.dumps(t.tolist()))
    ref = P.get("mess3")
    for f in ("m.npz", "m.json", "bare.json"):
        proc = P.get("hmm", path=str(tmp_path / f), length=6)
        tokens = ref.sample(3, 0, length=6).tokens
        assert np.allclose(proc.beliefs(tokens), ref.beliefs(tokens))
        assert proc.entropy_rate() == pytest.approx(ref.entropy_rate(), abs=1e-9)
    assert P.get("hmm", path=str(tmp_path / "m.npz")).symbols == ("a", "b", "c")
    assert P.get("hmm", path=str(tmp_path / "m.json")).states == ("x", "y", "z")
    assert P.get("hmm", path=str(tmp_path / "bare.json")).symbols == ("0", "1", "2")


def _bad_tensor(tmp_path: Path, tensor: Any, name: str = "t.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(tensor))
    return str(path)


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        ([[[0.5, -0.1], [0.6, 0.0]], [[0.3, 0.3], [0.2, 0.2]]], "negative entries"),
        ([[[0.5, 0.1], [0.6, 0.0]], [[0.3, 0.3], [0.2, 0.1]]], "sum to 1"),
        ([[0.5, 0.5], [0.5, 0.5]], "rank 2"),
        ([[[[1.0]]]], "rank 4"),
        ([[[0.5, 0.5, 0.0]], [[0.0, 0.0, 0.0]]], "shape"),
        ([[[1.0, 0.0], [0.0, 1.0]]], "stationary distributions"),
        ([[[0.5, 0.5], [0.5]]], "not a numeric array"),
        ({"transition": [[[1.0]]]}, "no key 'T'"),
    ],
)
def test_bad_transition_tensors_are_one_line(tmp_path: Path, tensor: Any, message: str) -> None:
    with pytest.raises(ParameterError, match=message) as err:
        P.get("hmm", path=_bad_tensor(tmp_path, tensor))
    assert "\n" not in str(err.value)
    with pytest.raises(ParameterError, match=message):
        if isinstance(tensor, dict):
            raise ParameterError("no key 'T'")
        P.HMM(np.asarray(tensor, dtype=object) if message == "not a numeric array"
              else np.asarray(tensor))


def test_bad_files_and_names_are_one_line(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({}, "mess4", "unknown process 'mess4'"),
        ({"y": 1}, "mess3", "unknown parameter 'y'"),
        ({"x": 0.6}, "mess3", "parameter 'x'"),
        ({"alpha": 1.0}, "mess3", "parameter 'alpha'"),
        ({"length": 0}, "rrxor", "parameter 'length'"),
        ({"a": -1.0}, "coin-tokens", "parameter 'a'"),
        ({"bins": 1}, "coin-tokens", "parameter 'bins'"),
        ({"path": ""}, "hmm", "parameter 'path'"),
        ({"path": str(tmp_path / "missing.npz")}, "hmm", "existing .npz or .json"),
        ({"path": _bad_tensor(tmp_path, [], "t.txt")}, "hmm", "a .npz or .json file"),
        ({"path": _bad_tensor(tmp_path, [], "t.npz")}, "hmm", "not a readable .npz"),
    ]
    (tmp_path / "junk.json").write_text("{not json")
    cases.append(({"path": str(tmp_path / "junk.json")}, "hmm", "not a readable JSON"))
    np.savez(tmp_path / "other.npz", A=np.ones(2), B=np.ones(2))
    cases.append(({"path": str(tmp_path / "other.npz")}, "hmm", "no array named 'T'"))
    for params, name, message in cases:
        with pytest.raises(ParameterError, match=message) as err:
            P.get(name, **params)
        assert "\n" not in str(err.value)


def test_bad_tokens_are_one_line() -> None:
    z1r = P.get("z1r")
    with pytest.raises(ParameterError, match="probability 0"):
        z1r.beliefs(np.array([[0, 0, 0, 0]]))  # z1r never emits 0 three times running
    for proc in (z1r, P.get("coin-tokens")):
        with pytest.raises(ParameterError, match=r"symbol ids in 0\.\.1"):
            proc.beliefs(np.array([[0, 2]]))
        with pytest.raises(ParameterError, match="2-d"):
            proc.beliefs(np.array([0, 1]))
    with pytest.raises(ParameterError, match="parameter 'seed'"):
        z1r.sample(2, -1)
    with pytest.raises(ParameterError, match="more than"):
        P.get("coin-tokens").enumerate_sequences(32)
