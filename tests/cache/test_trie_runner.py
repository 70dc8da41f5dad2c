"""Running over the token radix tree equals the full-prompt run (tiny random model)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.cache import rows, runner
from belieflens.cache.models import LoadedModel
from belieflens.cache.trie_runner import run_trie
from belieflens.envs.base import Query
from belieflens.probes.render import TokenizedQuery, bos_policy, render


def _queries(model: LoadedModel) -> list[TokenizedQuery]:
    bos = bos_policy(model.tokenizer)
    env = envs.get("coin-flip", turns=3, delivery="multi-turn")
    tqs = [
        render(model.tokenizer, q, bos=bos)
        for ep in env.episodes(2, seed=5)  # two episodes: prefixes of different lengths
        for t in ep.turns
        for p in t.probes
        for q in p.queries
    ]

    def raw(prompt: str, options: tuple[str, ...]) -> TokenizedQuery:
        q = Query((), prompt, options, tuple(range(len(options))), format="raw",
                  terminator=".")
        return render(model.tokenizer, q, bos=bos)

    tqs.append(raw("The total is", (" 1", " 12", " 7")))  # multi-token options
    tqs.append(raw("The total is", (" 12", " 1")))  # same rows, other order
    tqs.append(raw("The total is 1", (" and", " or")))  # extends another query's row
    tqs.append(tqs[0])  # a duplicate query
    return tqs


def _full(model: LoadedModel, tqs: list[TokenizedQuery], **kw: Any) -> list[rows.ReadOut]:
    return [runner.run_batch(model, [tq], **kw)[0] for tq in tqs]


def _close(a: rows.ReadOut, b: rows.ReadOut) -> None:
    scale = max(1.0, float(np.abs(a.resid).max()))
    assert np.abs(a.resid - b.resid).max() <= 1e-4 * scale
    assert np.allclose(a.option_logprob, b.option_logprob, atol=1e-4)
    assert abs(a.answer_lse - b.answer_lse) <= 1e-4 * max(1.0, abs(a.answer_lse))


@pytest.mark.parametrize(("max_rows", "max_tokens"), [(1, 1), (3, 200), (64, 100_000)])
def test_trie_run_equals_full_prompt_run(
    tiny_model: LoadedModel, max_rows: int, max_tokens: int
) -> None:
    tqs = _queries(tiny_model)
    full = _full(tiny_model, tqs, cont_resid=True, save_logits=True)
    seen: dict[int, rows.ReadOut] = {}
    tokens = 0
    for batch, outs, n in run_trie(tiny_model, tqs, max_rows=max_rows, max_tokens=max_tokens,
                                   save_logits=True, cont_resid=True):
        tokens += n
        for q, o in zip(batch, outs, strict=True):
            assert q not in seen
            seen[q] = o
    assert sorted(seen) == list(range(len(tqs)))
    ids = {r.ids for r in rows.forward_rows(tqs)}
    assert tokens == len({s[:k] for s in ids for k in range(1, len(s) + 1)})
    for q, tq in enumerate(tqs):
        a, b = full[q], seen[q]
        _close(a, b)
        assert a.logprobs is not None and b.logprobs is not None
        assert np.abs(a.logprobs - b.logprobs).max() <= 1e-4
        if tq.single_token:
            assert b.cont_resid is None
        else:
            assert a.cont_resid is not None and b.cont_resid is not None
            assert np.array_equal(np.isnan(a.cont_resid), np.isnan(b.cont_resid))
            ok = ~np.isnan(a.cont_resid)
            assert np.abs(a.cont_resid[ok] - b.cont_resid[ok]).max() <= 1e-4 * max(
                1.0, float(np.abs(a.cont_resid[ok]).max()))


def test_run_queries_uses_the_trie_and_computes_fewer_tokens(tiny_model: LoadedModel) -> None:
    tqs = _queries(tiny_model)
    shared = sum(n for _, _, n in runner.run_queries(tiny_model, tqs, max_rows=8,
                                                     max_tokens=4096))
    whole = sum(n for _, _, n in runner.run_queries(tiny_model, tqs, max_rows=8,
                                                    max_tokens=4096, reuse_prefix=False))
    assert whole == sum(len(r.ids) for r in rows.forward_rows(tqs))
    assert shared < whole / 2
