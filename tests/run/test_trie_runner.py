"""Running over the token radix tree equals the full-prompt run (tiny random model)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.episodes.base import Query
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery, bos_policy, render
from belieflens.run import rows, runner
from belieflens.run.trie_runner import run_trie


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


@pytest.fixture(scope="module")
def reference(tiny_model: LoadedModel
              ) -> tuple[list[TokenizedQuery], list[rows.ReadOut]]:
    """The queries and their full-prompt run, one query at a time (computed once: every
    packing below is compared with the same reference)."""
    tqs = _queries(tiny_model)
    return tqs, _full(tiny_model, tqs, cont_resid=True, save_logits=True)


def _close(a: rows.ReadOut, b: rows.ReadOut) -> None:
    scale = max(1.0, float(np.abs(a.resid).max()))
    assert np.abs(a.resid - b.resid).max() <= 1e-4 * scale
    assert np.allclose(a.option_logprob, b.option_logprob, atol=1e-4)
    assert abs(a.answer_lse - b.answer_lse) <= 1e-4 * max(1.0, abs(a.answer_lse))


@pytest.mark.parametrize(("max_rows", "max_tokens", "row_tokens"),
                         [(1, 1, 0), (3, 200, 0), (64, 100_000, 0), (1, 1, 512), (3, 200, 9),
                          (3, 400, 40), (64, 100_000, 512)])
def test_trie_run_equals_full_prompt_run(
    tiny_model: LoadedModel, reference: tuple[list[TokenizedQuery], list[rows.ReadOut]],
    max_rows: int, max_tokens: int, row_tokens: int
) -> None:
    """Every edge in a row of its own, or edges packed into rows under a tree mask."""
    tqs, full = reference
    seen: dict[int, rows.ReadOut] = {}
    tokens = 0
    for batch, outs, n in run_trie(tiny_model, tqs, max_rows=max_rows, max_tokens=max_tokens,
                                   save_logits=True, cont_resid=True, row_tokens=row_tokens):
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


def test_packed_rows_need_fewer_forward_calls(tiny_model: LoadedModel) -> None:
    tqs = _queries(tiny_model)
    calls = [0]

    def count(*_: Any) -> None:
        calls[0] += 1

    handle = tiny_model.bridge.original_model.register_forward_pre_hook(count)
    try:
        per_edge = packed = 0
        for row_tokens in (0, 512):
            calls[0] = 0
            for _ in run_trie(tiny_model, tqs, max_rows=64, max_tokens=100_000,
                              row_tokens=row_tokens):
                pass
            if row_tokens:
                packed = calls[0]
            else:
                per_edge = calls[0]
    finally:
        handle.remove()
    assert 1 <= packed < per_edge


def test_run_queries_uses_the_trie_and_computes_fewer_tokens(tiny_model: LoadedModel) -> None:
    tqs = _queries(tiny_model)
    shared = sum(n for _, _, n in runner.run_queries(tiny_model, tqs, max_rows=8,
                                                     max_tokens=4096))
    whole = sum(n for _, _, n in runner.run_queries(tiny_model, tqs, max_rows=8,
                                                    max_tokens=4096, reuse_prefix=False))
    assert whole == sum(len(r.ids) for r in rows.forward_rows(tqs))
    assert shared < whole / 2


def test_each_step_toward_the_floor_keeps_the_results(tiny_model: LoadedModel) -> None:
    """Eager vs SDPA attention, concatenated vs preallocated caches, hooks per call vs once."""
    tqs = _queries(tiny_model)

    def lps(**kw: Any) -> np.ndarray:
        out: dict[int, rows.ReadOut] = {}
        for batch, outs, _ in run_trie(tiny_model, tqs, max_rows=3, max_tokens=200,
                                       cont_resid=True, **kw):
            out.update(zip(batch, outs, strict=True))
        return np.concatenate([np.concatenate([out[q].option_logprob, out[q].resid.ravel()])
                               for q in range(len(tqs))])

    new = lps()
    for kw in ({"attention": "eager", "prealloc": False, "hooks_once": False},
               {"attention": "sdpa", "prealloc": False, "hooks_once": True},
               {"attention": "eager", "prealloc": True, "hooks_once": False}):
        old = lps(**kw)
        assert np.abs(new - old).max() <= 1e-4 * max(1.0, float(np.abs(old).max())), kw


def test_sdpa_attention_is_switched_on_and_steps_aside_for_pattern_hooks(
    tiny_model: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from belieflens.model.attention import fast_modules, sdpa_attention

    bridge = tiny_model.bridge
    mods = fast_modules(bridge)
    assert len(mods) == tiny_model.info.n_layers
    ids = torch.randint(0, tiny_model.info.vocab_size, (2, 12),
                        generator=torch.Generator().manual_seed(0))
    seen: list[int] = []
    calls: list[int] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counted(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return sdpa(*a, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)

    def pattern(t: Any, hook: Any) -> Any:
        seen.append(int(t.shape[-1]))
        return t

    with torch.inference_mode():
        eager = bridge(ids).float()
        with sdpa_attention(bridge) as n:
            assert n == len(mods)
            assert all("forward" in m.__dict__ for m in mods)
            fast = bridge(ids).float()
            assert len(calls) == len(mods)
            hooked = bridge.run_with_hooks(ids, fwd_hooks=[("blocks.0.attn.hook_pattern",
                                                            pattern)]).float()
        assert seen == [12]  # the hooked module ran the eager steps, the other one SDPA
        assert len(calls) == 2 * len(mods) - 1
        with sdpa_attention(bridge, "eager") as n_eager:
            assert n_eager == 0
    assert not any("forward" in m.__dict__ for m in mods)  # restored on exit
    assert not any("forward" in m.original_component.__dict__ for m in mods)
    assert float((torch.log_softmax(eager, -1) - torch.log_softmax(fast, -1)).abs().max()) <= 1e-4
    assert float((hooked - eager).abs().max()) <= 1e-4


def test_a_forward_between_yields_is_not_captured(tiny_model: LoadedModel) -> None:
    """The hooks stay attached while the runner yields; a caller's forward must not trip them."""
    import torch

    tqs = _queries(tiny_model)[:6]
    alone = {q: o for b, outs, _ in run_trie(tiny_model, tqs, max_rows=3, max_tokens=200)
             for q, o in zip(b, outs, strict=True)}
    mixed: dict[int, rows.ReadOut] = {}
    for b, outs, _ in run_trie(tiny_model, tqs, max_rows=3, max_tokens=200):
        mixed.update(zip(b, outs, strict=True))
        with torch.inference_mode():
            tiny_model.bridge(torch.tensor([[1, 2]]))  # one row: stale indices would fail
    for q in range(len(tqs)):
        assert np.array_equal(alone[q].resid, mixed[q].resid)
        assert np.array_equal(alone[q].option_logprob, mixed[q].option_logprob)
