"""Runner on a tiny random model: batching parity, hook capture, multi-token options, store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

import belieflens.envs as envs
from belieflens.episodes.base import Query
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery, bos_policy, render
from belieflens.run import rows, runner
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache


def _coin_queries(model: LoadedModel, n_turns: int = 3) -> list[TokenizedQuery]:
    env = envs.get("coin-flip", turns=n_turns)
    bos = bos_policy(model.tokenizer)
    return [
        render(model.tokenizer, q, bos=bos)
        for ep in env.episodes(1, seed=3)
        for t in ep.turns
        for p in t.probes
        for q in p.queries
    ]


def _raw(model: LoadedModel, prompt: str, options: tuple[str, ...]) -> TokenizedQuery:
    q = Query((), prompt, options, tuple(range(len(options))), format="raw", terminator=".")
    return render(model.tokenizer, q, bos=bos_policy(model.tokenizer))


@pytest.mark.parametrize("padding", ["right", "left"])
def test_batched_equals_one_by_one_uneven_lengths(tiny_model: LoadedModel, padding: str) -> None:
    tqs = _coin_queries(tiny_model)
    pick = [tqs[0], tqs[-1], tqs[len(tqs) // 2], tqs[3]]
    assert len({len(t.context_ids) for t in pick}) > 1  # uneven lengths
    batched = runner.run_batch(tiny_model, pick, padding_side=padding)  # type: ignore[arg-type]
    for tq, b in zip(pick, batched, strict=True):
        (one,) = runner.run_batch(tiny_model, [tq])
        assert np.abs(b.resid - one.resid).max() <= 1e-4 * max(1.0, np.abs(one.resid).max())
        assert np.allclose(b.option_logprob, one.option_logprob, atol=1e-4)


def test_hook_capture_equals_run_with_cache(tiny_model: LoadedModel) -> None:
    tq = _coin_queries(tiny_model)[5]
    (out,) = runner.run_batch(tiny_model, [tq])
    ids = torch.tensor([tq.context_ids])
    with torch.inference_mode():
        logits, cache = tiny_model.bridge.run_with_cache(ids)
    names = rows.resid_hook_names(tiny_model.info.n_layers)
    full = np.stack([cache[n][0, tq.answer_pos].float().numpy() for n in names])
    assert np.allclose(out.resid, full, atol=1e-5)
    lp = torch.log_softmax(logits[0, tq.answer_pos].float(), -1)
    expected = [float(lp[c[0]]) for c in tq.option_ids]
    assert np.allclose(out.option_logprob, expected, atol=1e-5)


def test_multi_token_option_is_sum_over_its_tokens(tiny_model: LoadedModel) -> None:
    tq = _raw(tiny_model, "The total is", (" 1", " 12", " 7"))
    assert not tq.single_token
    (out,) = runner.run_batch(tiny_model, [tq])
    for j, cont in enumerate(tq.option_ids):
        ids = torch.tensor([tq.context_ids + cont])
        with torch.inference_mode():
            logits = tiny_model.bridge(ids)
        lp = torch.log_softmax(logits[0].float(), -1)
        total = sum(float(lp[tq.answer_pos + i, t]) for i, t in enumerate(cont))
        assert out.option_logprob[j] == pytest.approx(total, abs=1e-4)


def test_plan_batches_respects_budgets_and_covers_all(tiny_model: LoadedModel) -> None:
    tqs = _coin_queries(tiny_model)
    batches = runner.plan_batches(tqs, max_rows=3, max_tokens=10_000)
    assert sorted(i for b in batches for i in b) == list(range(len(tqs)))
    assert all(sum(rows.row_count(tqs[i]) for i in b) <= 3 for b in batches)


def test_file_round_trip_opens_with_plain_xarray(tiny_model: LoadedModel, tmp_path: Path) -> None:
    env = envs.get("coin-flip", turns=2)
    out = write_cache(env, tiny_model, tmp_path / "c.h5",
                  ExtractOptions(episodes=2, max_rows=5, window=7))
    ds = xr.open_dataset(out, engine="h5netcdf")
    n = 2 * 3 * 2 * (2 + 5)
    assert ds.sizes["query"] == n
    assert ds.sizes["layer"] == tiny_model.info.n_layers + 1
    for name in ("resid", "option_logprob", "input_ids", "answer_pos", "option_ids",
                 "outcome", "outcome_label", "oracle"):
        assert name in ds.variables
    for c in ("episode", "turn", "rotation", "probe", "env", "delivery"):
        assert c in ds.coords
    assert ds["input_ids"].dtype.kind == "i"
    assert int(ds["complete"].sum()) == n
    assert ds.attrs["status"] == "complete"
    assert ds.attrs["model_id"] == "tiny-random"
    # the first row's context ids and read-outs match a direct run
    bos = bos_policy(tiny_model.tokenizer)
    first = next(iter(env.episodes(1, seed=0))).turns[0].probes[0].queries[0]
    tq = render(tiny_model.tokenizer, first, bos=bos)
    row = ds.isel(query=0)
    ids = row["input_ids"].values
    assert tuple(int(x) for x in ids[ids >= 0]) == tq.context_ids
    (direct,) = runner.run_batch(tiny_model, [tq])
    assert np.allclose(row["resid"].values, direct.resid, atol=1e-4)
    assert np.allclose(row["option_logprob"].values[:2], direct.option_logprob, atol=1e-5)
    assert np.allclose(ds["oracle"].sum("outcome", skipna=True).values, 1.0)
    assert not Path(str(out) + ".partial").exists()
    ds.close()


def test_prefix_reuse_equals_full_prompt_run(tiny_model: LoadedModel) -> None:
    assert tiny_model.info.prefix_reuse  # the KV-cache self-check passed at load
    tqs = _coin_queries(tiny_model, n_turns=3)
    tqs.append(_raw(tiny_model, "The total is", (" 1", " 12", " 7")))  # multi-token rows
    full: dict[int, rows.ReadOut] = {}
    for batch, outs, _ in runner.run_queries(tiny_model, tqs, max_rows=4, max_tokens=4096,
                                             reuse_prefix=False):
        full.update(zip(batch, outs, strict=True))
    reused: dict[int, rows.ReadOut] = {}
    for batch, outs, _ in runner.run_queries(tiny_model, tqs, max_rows=4, max_tokens=4096,
                                             reuse_prefix=True):
        reused.update(zip(batch, outs, strict=True))
    assert sorted(full) == sorted(reused) == list(range(len(tqs)))
    for i in range(len(tqs)):
        a, b = full[i], reused[i]
        scale = max(1.0, float(np.abs(a.resid).max()))
        assert np.abs(a.resid - b.resid).max() <= 1e-4 * scale
        assert np.allclose(a.option_logprob, b.option_logprob, atol=1e-4)


def test_cont_resid_equals_full_cache_at_continuation_positions(tiny_model: LoadedModel) -> None:
    tq = _raw(tiny_model, "The total is", (" 1", " 12", " 7"))
    (out,) = runner.run_batch(tiny_model, [tq], cont_resid=True)
    assert out.cont_resid is not None
    names = rows.resid_hook_names(tiny_model.info.n_layers)
    for j, cont in enumerate(tq.option_ids):
        ids = torch.tensor([tq.context_ids + cont])
        with torch.inference_mode():
            _, cache = tiny_model.bridge.run_with_cache(ids)
        for i in range(len(cont) - 1):
            ref = np.stack([cache[n][0, tq.answer_pos + 1 + i].float().numpy() for n in names])
            assert np.allclose(out.cont_resid[j, i], ref, atol=1e-4)
        assert np.isnan(out.cont_resid[j, len(cont) - 1 :]).all()


def test_auto_batch_budget_is_deterministic_and_fits(
    tiny_model: LoadedModel, tmp_path: Path
) -> None:
    from belieflens.run.budget import auto_budget, bytes_per_token

    a = auto_budget(tiny_model, 300)
    assert a == auto_budget(tiny_model, 300)
    assert a.max_rows >= 1 and a.max_tokens >= 300
    assert a.max_tokens * bytes_per_token(tiny_model, 300) <= 0.25 * a.bytes_available + 1
    env = envs.get("coin-flip", turns=1, delivery="single-turn")
    out = write_cache(env, tiny_model, tmp_path / "auto.h5", ExtractOptions(episodes=1, max_rows=0))
    ds = xr.open_dataset(out, engine="h5netcdf")
    assert int(ds["complete"].sum()) == ds.sizes["query"] == 2 * 7
    ds.close()
