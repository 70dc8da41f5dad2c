"""Prompts that extend an earlier generation start from its stored cache: the longest stored
prefix is found, the store keeps to its byte limit, and the texts equal whole prompts' on
the tiny models, one of whose layers slide (rows with and without a stored prefix in one
batch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from belieflens.episodes.base import Message
from belieflens.model.load import LoadedModel
from belieflens.run.gen_prefix import MIN_PREFIX, PrefixStore
from belieflens.run.generate import GenerationCall, generate, prompt_ids
from belieflens.run.generate_batch import generate_batch

pytestmark = pytest.mark.usefixtures("one_thread")

NO_STOP: frozenset[int] = frozenset()


def _layers(n: int, tokens: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.zeros(2, tokens, 4), torch.zeros(2, tokens, 4)) for _ in range(n)]


def test_match_finds_the_longest_stored_prefix_but_never_the_last_token() -> None:
    store = PrefixStore(limit=1 << 20)
    base = list(range(100, 140))
    store.add(base[:30], _layers(2, 30))
    store.add([*base[:35], 7, 7], _layers(2, 37))
    length, row = store.match(base)
    assert length == 35 and row is not None and len(row.ids) == 37
    assert store.match(base[:36])[0] == 35  # the prompt's last token always runs
    assert store.match([*base[:MIN_PREFIX], 1])[0] == MIN_PREFIX
    assert store.match([*base[:MIN_PREFIX - 1], 1]) == (0, None)
    assert store.match([5, *base]) == (0, None)


def test_the_store_keeps_to_its_limit_oldest_first() -> None:
    one = sum(k.numel() * 4 * 2 for k, _ in _layers(2, 30))
    store = PrefixStore(limit=2 * one)
    for start in (0, 1000, 2000):
        store.add(list(range(start, start + 30)), _layers(2, 30))
    assert store.bytes == 2 * one and [int(r.ids[0]) for r in store.rows] == [1000, 2000]
    store.add(list(range(30)), _layers(2, 90))  # larger than the whole limit: not kept
    assert len(store.rows) == 2


def _call(messages: tuple[Message, ...], seed: int, temperature: float) -> GenerationCall:
    return GenerationCall(messages, seed=seed, max_new_tokens=6, temperature=temperature)


@pytest.fixture(params=["llama", "gemma"])
def model(request: pytest.FixtureRequest) -> LoadedModel:
    """The tiny Llama, and the tiny Gemma 3 whose layers slide over 4 positions."""
    name = "tiny_model" if request.param == "llama" else "tiny_gemma_model"
    loaded: LoadedModel = request.getfixturevalue(name)
    return loaded


def test_continued_conversations_equal_whole_prompts(model: LoadedModel) -> None:
    store = PrefixStore(limit=1 << 30)
    firsts = [(Message("user", f"conversation {i}: " + "tell me about the sea " * (i + 2)),)
              for i in range(3)]
    calls = [_call(m, seed=i, temperature=5.0 * (i % 2)) for i, m in enumerate(firsts)]
    replies = generate_batch(model, calls, stop_ids=NO_STOP, store=store)
    assert len(store.rows) == 3
    # the next turn of the first two conversations, and a new one, in one batch
    nexts: list[tuple[Message, ...]] = [
        (*m, Message("assistant", r.text.strip()), Message("user", "and then?"))
        for m, r in zip(firsts[:2], replies, strict=False)]
    nexts.append((Message("user", "an unrelated question about mountains"),))
    second = [_call(m, seed=10 + i, temperature=5.0 * (i % 2)) for i, m in enumerate(nexts)]
    for c, m in zip(second[:2], firsts[:2], strict=True):
        reused, _ = store.match(prompt_ids(model.tokenizer, c.messages))
        assert reused >= len(prompt_ids(model.tokenizer, m)) - 1
    # the unrelated prompt shares only the chat template's system prompt
    shared = store.match(prompt_ids(model.tokenizer, second[2].messages))[0]
    assert 0 < shared < len(prompt_ids(model.tokenizer, firsts[0])) - 8
    together = generate_batch(model, second, stop_ids=NO_STOP, store=store)
    alone = [generate(model, c.messages, seed=c.seed, max_new_tokens=c.max_new_tokens,
                      temperature=c.temperature, stop_ids=NO_STOP) for c in second]
    assert together == alone
    assert len(store.rows) == 6 and all(isinstance(r.ids, np.ndarray) for r in store.rows)


def test_rows_started_from_stored_prefixes_give_whole_prompts_log_probs(
        model: LoadedModel) -> None:
    """Rows reusing stored prefixes of 40, 30 and 20 tokens for prompts of 45, 50 and 60: the
    widest row's new tokens outnumber the others', whose past would otherwise end in a gap
    that a sliding window counts."""
    from belieflens.run.gen_prefix import keep_rows, start

    bridge = model.bridge
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(100, 5000, (3, 60), generator=gen).tolist()
    store = PrefixStore(limit=1 << 30)
    with torch.inference_mode():
        for ids in (p[:n] for p, n in zip(prompts, (40, 30, 20), strict=True)):
            _, cache, mask, _ = start(bridge, [ids], [(0, None)], 0, "cpu")
            keep_rows(store, cache, mask, [0], [ids])
        assert len(store.rows) == 3  # a sliding model's rows are stored too
        rows = [p[:n] for p, n in zip(prompts, (45, 50, 60), strict=True)]
        pasts = [store.match(r) for r in rows]
        assert [p for p, _ in pasts] == [40, 30, 20]
        logits, *_ = start(bridge, rows, pasts, 0, "cpu")
        for i, r in enumerate(rows):
            whole = bridge(torch.tensor([r]))[0, -1].log_softmax(-1)
            torch.testing.assert_close(logits[i, -1].log_softmax(-1), whole,
                                       atol=1e-4, rtol=0)
