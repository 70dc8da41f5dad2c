"""Prompts that extend an earlier generation start from its stored cache: the longest stored
prefix is found, the store keeps to its byte limit, and the texts equal whole prompts' on
the tiny model (rows with and without a stored prefix in one batch)."""

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


def test_continued_conversations_equal_whole_prompts(tiny_model: LoadedModel) -> None:
    store = PrefixStore(limit=1 << 30)
    firsts = [(Message("user", f"conversation {i}: " + "tell me about the sea " * (i + 2)),)
              for i in range(3)]
    calls = [_call(m, seed=i, temperature=5.0 * (i % 2)) for i, m in enumerate(firsts)]
    replies = generate_batch(tiny_model, calls, stop_ids=NO_STOP, store=store)
    assert len(store.rows) == 3
    # the next turn of the first two conversations, and a new one, in one batch
    nexts: list[tuple[Message, ...]] = [
        (*m, Message("assistant", r.text.strip()), Message("user", "and then?"))
        for m, r in zip(firsts[:2], replies, strict=False)]
    nexts.append((Message("user", "an unrelated question about mountains"),))
    second = [_call(m, seed=10 + i, temperature=5.0 * (i % 2)) for i, m in enumerate(nexts)]
    for c, m in zip(second[:2], firsts[:2], strict=True):
        reused, _ = store.match(prompt_ids(tiny_model.tokenizer, c.messages))
        assert reused >= len(prompt_ids(tiny_model.tokenizer, m)) - 1
    # the unrelated prompt shares only the chat template's system prompt
    shared = store.match(prompt_ids(tiny_model.tokenizer, second[2].messages))[0]
    assert 0 < shared < len(prompt_ids(tiny_model.tokenizer, firsts[0])) - 8
    together = generate_batch(tiny_model, second, stop_ids=NO_STOP, store=store)
    alone = [generate(tiny_model, c.messages, seed=c.seed, max_new_tokens=c.max_new_tokens,
                      temperature=c.temperature, stop_ids=NO_STOP) for c in second]
    assert together == alone
    assert len(store.rows) == 6 and all(isinstance(r.ids, np.ndarray) for r in store.rows)
