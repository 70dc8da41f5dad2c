"""``--max-memory``: sizes as text, the plan of a budget, and retained caches that honour it."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import belieflens.envs as envs
from belieflens.errors import ParameterError
from belieflens.model.attention import AttentionName
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery, bos_policy, render
from belieflens.run.budget import (
    HELD_SHARE,
    bytes_per_token,
    call_bytes,
    format_size,
    generation_batches,
    generation_bytes,
    kv_bytes_per_token,
    parse_size,
    plan_memory,
    runner_attention,
)
from belieflens.run.extract import ExtractOptions
from belieflens.run.rows import ReadOut
from belieflens.run.trie_runner import CacheStats, run_trie

pytestmark = pytest.mark.usefixtures("one_thread")

UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "KiB": 1 << 10,
         "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "kB": 1000, "MB": 10**6, "GB": 10**9,
         "gb": 10**9, "TB": 10**12}


@pytest.mark.parametrize(("text", "size"), [
    ("1.5GB", 1_500_000_000), ("800MiB", 800 << 20), ("2G", 2 << 30), ("2g", 2 << 30),
    ("1048576", 1 << 20), (" 3 MB ", 3_000_000), ("0.5GiB", 1 << 29), (".5K", 512), (4096, 4096),
])
def test_sizes(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@given(st.integers(1, 10**6), st.sampled_from(sorted(UNITS)))
def test_whole_sizes_in_every_unit(n: int, unit: str) -> None:
    assert parse_size(f"{n}{unit}") == n * UNITS[unit]


@pytest.mark.parametrize("text", ["", "GB", "lots", "1.5XB", "-1GB", "0", "0MB", "1e9", "1 2G",
                                  "nan", 0, -5])
def test_not_a_size_is_one_line(text: str | int) -> None:
    with pytest.raises(ParameterError, match="'--max-memory'") as e:
        parse_size(text)
    assert "\n" not in str(e.value) and "1.5GB" in str(e.value)


def test_options_take_a_size_or_auto() -> None:
    assert ExtractOptions.of(max_memory="2G").max_memory == 2 << 30
    assert ExtractOptions.of(max_memory="auto").max_memory == 0
    assert ExtractOptions.of(max_memory=1 << 20).max_memory == 1 << 20
    with pytest.raises(ParameterError, match="'--max-memory'"):
        ExtractOptions(max_memory=-1)


def test_kv_bytes_match_the_models_cache(tiny_model: LoadedModel) -> None:
    """2 layers x 2 kv heads x head dim 16 x keys and values x 4 bytes, as a forward's cache
    holds them."""
    import torch

    with torch.inference_mode():
        _, cache = tiny_model.bridge(torch.tensor([[1, 2, 3, 4, 5]]), use_cache=True,
                                     return_type="logits_and_cache")
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert kv_bytes_per_token(tiny_model) == held // 5 == 512


@settings(deadline=None, max_examples=60)
@given(longest=st.integers(1, 4000), extra=st.integers(0, 1 << 28),
       max_tokens=st.integers(1, 1 << 16),
       window=st.integers(1, 2048), readout=st.integers(1, 1 << 16),
       attention=st.sampled_from(["sdpa", "eager"]))
def test_plan_fits_the_budget(tiny_model: LoadedModel, longest: int, extra: int, max_tokens: int,
                              window: int, readout: int, attention: AttentionName) -> None:
    """Above the minimum and one window's read-outs the call, the held read-outs and the
    retained caches fit the budget together, the call never grows past the options', a longest
    prefix is always retained, and the read-outs held take at most their share of the budget
    (or are one)."""
    kv = kv_bytes_per_token(tiny_model)
    minimum = call_bytes(tiny_model, longest, longest, attention=attention) + longest * kv + readout
    per = minimum - readout
    budget = minimum + window * readout + extra
    plan = plan_memory(tiny_model, budget, longest=longest, max_tokens=max_tokens, window=window,
                       readout_bytes=readout, attention=attention)
    assert plan.minimum == minimum
    assert plan.call_bytes + plan.window_bytes + plan.retained_bytes <= budget
    assert min(longest, max_tokens) <= plan.max_tokens <= max_tokens
    assert plan.retained_bytes >= plan.max_tokens * kv
    assert 1 <= plan.held_rows <= window and plan.window_bytes == plan.held_rows * readout
    assert plan.held_rows == 1 or plan.window_bytes <= budget * HELD_SHARE
    if max_tokens >= longest and budget >= window * readout + max_tokens * per // longest:
        assert plan.max_tokens == max_tokens  # lowered only when a call would not fit
    with pytest.raises(ParameterError, match="at least") as e:
        plan_memory(tiny_model, minimum - 1, longest=longest, max_tokens=max_tokens,
                    window=window, readout_bytes=readout, attention=attention)
    assert "\n" not in str(e.value)


def test_fused_attention_holds_no_scores(tiny_model: LoadedModel) -> None:
    """SDPA's estimate leaves out the eager path's scores and softmax (two per head and past
    position); the radix-tree runner fuses a plain rotary model's attention, the plain runner
    does not."""
    heads = int(tiny_model.bridge.cfg.n_heads)
    for seq in (1, 300, 4000):
        eager = bytes_per_token(tiny_model, seq, "eager")
        assert eager - bytes_per_token(tiny_model, seq, "sdpa") == 4 * 2 * heads * seq
    assert runner_attention(tiny_model, reuse=True) == "sdpa"
    assert runner_attention(tiny_model, reuse=False) == "eager"


def test_held_readouts_are_written_within_the_budget(tiny_model: LoadedModel,
                                                     tmp_path: Path) -> None:
    """Under a budget whose share for read-outs holds fewer than a window, they are written as
    that many are done (no write holds more), and the file equals the default's bit for bit."""
    from belieflens.run.extract import prepare
    from belieflens.run.lifecycle import write_cache
    from belieflens.store.file import PartialFile
    from tests.conftest import assert_same_data

    env = envs.get("coin-flip", turns=4, delivery="multi-turn")
    base = ExtractOptions(episodes=10, max_rows=2, max_tokens=400)
    out = write_cache(env, tiny_model, tmp_path / "a.h5", base)
    tight = dataclasses.replace(base, max_memory=2_000_000)
    p = prepare(env, tiny_model, tight)
    assert 1 < p.held_rows < len(p.recs) <= base.window
    assert p.max_tokens == base.max_tokens  # the calls are the default's
    writes: list[int] = []
    write_runs = PartialFile.write_runs

    def counted(self: PartialFile, runs: Any) -> None:
        writes.append(sum(len(next(iter(v.values()))) for _, v in runs))
        write_runs(self, runs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PartialFile, "write_runs", counted)
        held = write_cache(env, tiny_model, tmp_path / "b.h5", tight)
    assert sum(writes) == len(p.recs) and len(writes) > 1
    assert max(writes) < p.held_rows + base.max_rows * 40  # a batch's read-outs at most over
    assert_same_data(out, held)


def _queries(model: LoadedModel) -> list[TokenizedQuery]:
    bos = bos_policy(model.tokenizer)
    env = envs.get("coin-flip", turns=6, delivery="all")
    return [render(model.tokenizer, q, bos=bos) for ep in env.episodes(2, seed=3)
            for t in ep.turns for p in t.probes for q in p.queries]


def _run(model: LoadedModel, tqs: list[TokenizedQuery], **kw: Any) -> dict[int, ReadOut]:
    out: dict[int, ReadOut] = {}
    for batch, outs, _ in run_trie(model, tqs, max_rows=2, max_tokens=2000, save_logits=True,
                                   **kw):
        out.update(zip(batch, outs, strict=True))
    return out


def test_eviction_keeps_the_limit_and_the_results(tiny_model: LoadedModel) -> None:
    """Under a tight limit the retained caches never pass it, evicted prefixes are computed
    again, and every read-out is the same bit for bit as with every prefix held."""
    tqs = _queries(tiny_model)
    free, tight = CacheStats(), CacheStats()
    whole = _run(tiny_model, tqs, stats=free)
    longest = max(len(tq.context_ids) for tq in tqs)
    limit = 2 * longest * kv_bytes_per_token(tiny_model)  # two rows' pasts: one call's
    assert free.peak_bytes > limit and free.recomputed_calls == 0
    bounded = _run(tiny_model, tqs, stats=tight, retain_bytes=limit)
    assert 0 < tight.peak_bytes <= limit
    assert tight.recomputed_calls > 0
    assert sorted(bounded) == sorted(whole) == list(range(len(tqs)))
    for q, a in whole.items():
        b = bounded[q]
        assert np.array_equal(a.resid, b.resid)
        assert np.array_equal(a.option_logprob, b.option_logprob)
        assert a.answer_lse == b.answer_lse
        assert a.logprobs is not None and b.logprobs is not None
        assert np.array_equal(a.logprobs, b.logprobs)


@given(st.integers(1, 1 << 44))
@example(13_011_173_926_503)  # over 6 significant digits of GiB
def test_a_size_shown_passes_back_as_at_least_itself(n: int) -> None:
    shown = format_size(n)
    assert n <= parse_size(shown) <= n * 1.1 + 1024


@settings(deadline=None, max_examples=60)
@given(prompts=st.lists(st.integers(1, 3000), min_size=1, max_size=40),
       new=st.integers(1, 512), rows=st.integers(1, 64), budget=st.integers(1, 1 << 31))
def test_generation_batches_fit_the_budget_and_the_row_cap(
    tiny_model: LoadedModel, prompts: list[int], new: int, rows: int, budget: int
) -> None:
    """Every request is in one batch; a batch holds at most ``rows`` rows and fits the budget
    at its longest prompt, or is one request alone; batches are as full as the budget allows
    (a batch and the next one's first request would not fit together)."""
    news = [new] * len(prompts)
    batches = generation_batches(tiny_model, prompts, news, budget=budget, max_rows=rows)
    assert sorted(i for b in batches for i in b) == list(range(len(prompts)))

    def need(batch: list[int]) -> int:
        return generation_bytes(tiny_model, len(batch), max(prompts[i] for i in batch), new)

    for b in batches:
        assert len(b) <= rows
        assert len(b) == 1 or need(b) <= budget
    for b, after in itertools.pairwise(batches):
        grown = [*b, after[0]]
        assert len(grown) > rows or need(grown) > budget


def test_generation_bytes_count_the_cache_and_the_prompts_call(tiny_model: LoadedModel) -> None:
    kv = kv_bytes_per_token(tiny_model)
    one = generation_bytes(tiny_model, 1, 100, 50)
    assert one > 150 * kv + 100 * bytes_per_token(tiny_model, 100, "eager")
    assert generation_bytes(tiny_model, 8, 100, 50) == 8 * one
    assert generation_bytes(tiny_model, 1, 100, 60) - one == 10 * kv
