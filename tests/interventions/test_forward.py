"""The forward engine of the interventions: reusing the clean run's keys and values
(:func:`run_edited`) gives the full forwards' numbers at every layer, on the tiny random
Llama and on a shipped GPT-2 toy, and runs only the positions from the edit on."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from belieflens.interventions.forward import (
    RowBatch,
    at_answer,
    clean_run,
    edit_starts,
    run_edited,
    run_from,
    run_replaced,
    with_answer,
)
from belieflens.interventions.readouts import read_study
from belieflens.model.load import LoadedModel

ATOL, RTOL = 1e-5, 1e-6
"""Full forwards and the reusing paths agree this closely (CPU, float32; the relative part
covers float32's rounding of the random model's log-probs, near -70)."""


def _mixed_batch(study: Any) -> RowBatch:
    """Read-outs of three different context lengths; the middle one's options made
    multi-token (two and three tokens: one row per option, of different lengths)."""
    by_len: dict[int, int] = {}
    for q, tq in enumerate(study.queries):
        by_len.setdefault(len(tq.context_ids), q)
    lens = sorted(by_len)
    picked = [study.queries[by_len[n]] for n in (lens[0], lens[len(lens) // 2], lens[-1])]
    a, b = (o[0] for o in picked[1].option_ids[:2])
    picked[1] = dataclasses.replace(picked[1], option_ids=((a, b), (b, a, a)))
    batch = RowBatch.of(picked)
    assert len(set(batch.lengths().tolist())) >= 4
    assert sum(r.option is not None for r in batch.rows) == 2
    return batch


def _edits(batch: RowBatch, res: torch.Tensor, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    """Three tiles of ``res``: shifted at the answer position, shifted at every position
    from the middle of each context on, unedited; and where each row's edit starts."""
    gen = torch.Generator().manual_seed(seed)
    ans = at_answer(res, batch)
    shift = torch.randn(ans.shape, generator=gen) * ans.norm(dim=-1, keepdim=True) / 4
    mid = np.array([(r.answer_pos + 1) // 2 for r in batch.rows])
    after = torch.as_tensor(np.arange(batch.width)[None, :] >= mid[:, None])[:, :, None]
    edited = torch.cat([with_answer(res, batch, ans + shift), res + after * shift[:, None, :],
                        res])
    return edited, np.concatenate([batch.answer_positions(), mid, batch.answer_positions()])


def _check_every_layer(model: LoadedModel, batch: RowBatch) -> None:
    """At every layer the reusing path equals full forwards, and the unedited tile equals
    the clean run."""
    clean = clean_run(model, batch)
    assert clean.cache is not None
    tiled = batch.tile(3)
    n = len(batch.queries)
    for layer in range(model.info.n_layers + 1):
        edited, starts = _edits(batch, clean.resid[layer], seed=layer)
        np.testing.assert_array_equal(edit_starts(tiled, layer, edited, clean), starts)
        kv = run_edited(model, tiled, layer, edited, clean)
        full = run_replaced(model, tiled, layer, edited)
        np.testing.assert_allclose(kv, full, atol=ATOL, rtol=RTOL)
        np.testing.assert_allclose(run_from(model, tiled, layer, edited), full, atol=ATOL,
                                   rtol=RTOL)
        np.testing.assert_allclose(kv[2 * n :], clean.logprob, atol=ATOL, rtol=RTOL)
        assert np.nanmax(np.abs(kv[:n] - clean.logprob)) > 1e-3  # the edit moved something


def test_reusing_the_cache_equals_full_forwards_on_the_tiny_model(tiny_model: Any,
                                                                 tiny_study: Path) -> None:
    _check_every_layer(tiny_model, _mixed_batch(read_study(tiny_study)))


def test_reusing_the_cache_equals_full_forwards_where_layers_slide(
        tiny_gemma_model: LoadedModel, tiny_study: Path) -> None:
    """Gemma 3's sliding layers keep only their window in the model's own cache; the clean
    run keeps every position instead (the window is the mask's), so its cache is reused
    and every context, far longer than the window of 4, gives the full forwards' numbers."""
    batch = _mixed_batch(read_study(tiny_study))
    assert int(batch.lengths().min()) > 4 * 4
    _check_every_layer(tiny_gemma_model, batch)


@pytest.fixture(scope="module")
def mess3_toy() -> LoadedModel:
    from belieflens.model.load import load

    return load("mess3-toy")


def test_reusing_the_cache_equals_full_forwards_on_a_gpt2_toy(
    mess3_toy: LoadedModel, tmp_path: Path
) -> None:
    """GPT-2 adds position embeddings to what it is fed: at layer L (no block runs) the
    prefix-reuse path was off by ~0.01 nats (issue 27) until the residual itself reached
    the final norm."""
    import belieflens

    env = belieflens.envs.get("mess3", length=6)
    study = read_study(belieflens.extract(env, out=tmp_path / "m.h5", model=mess3_toy,
                                          episodes=2, seed=3))
    _check_every_layer(mess3_toy, _mixed_batch(study))


@pytest.fixture()
def block_widths(tiny_model: Any) -> Iterator[list[int]]:
    """How many positions the last block runs on, per call."""
    widths: list[int] = []

    def record(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        x = args[0] if args else kwargs["hidden_states"]
        widths.append(int(x.shape[1]))

    handle = tiny_model.bridge.blocks[tiny_model.info.n_layers - 1].register_forward_pre_hook(
        record, with_kwargs=True)
    yield widths
    handle.remove()


def test_an_answer_edit_runs_only_the_read_positions(tiny_model: Any, tiny_study: Path,
                                                     block_widths: list[int]) -> None:
    """Rows grouped by where their edit starts; each group runs from there to its longest
    row's end: the answer position, plus a multi-token option's continuation tokens."""
    batch = _mixed_batch(read_study(tiny_study))
    clean = clean_run(tiny_model, batch)
    res = clean.resid[1]
    block_widths.clear()
    run_edited(tiny_model, batch, 1, with_answer(res, batch, at_answer(res, batch) + 1.0), clean)
    groups: dict[int, int] = {}
    for r in batch.rows:
        groups[r.answer_pos] = max(groups.get(r.answer_pos, 0), len(r.ids) - r.answer_pos)
    assert sorted(block_widths) == sorted(groups.values())
    assert max(block_widths) < batch.width // 4
    block_widths.clear()
    run_from(tiny_model, batch, 1, res)
    assert block_widths == [batch.width]


def test_without_a_cache_the_reusing_path_runs_every_position(tiny_model: Any,
                                                              tiny_study: Path) -> None:
    batch = _mixed_batch(read_study(tiny_study))
    clean = clean_run(tiny_model, batch, keep_cache=False)
    assert clean.cache is None
    res = clean.resid[1]
    edited = with_answer(res, batch, at_answer(res, batch) * 2)
    np.testing.assert_allclose(run_edited(tiny_model, batch, 1, edited, clean),
                               run_replaced(tiny_model, batch, 1, edited), atol=ATOL, rtol=RTOL)


def test_a_batch_that_is_not_the_clean_runs_is_refused(tiny_model: Any,
                                                       tiny_study: Path) -> None:
    study = read_study(tiny_study)
    batch = _mixed_batch(study)
    clean = clean_run(tiny_model, batch)
    other = RowBatch.of(list(reversed(batch.queries)))
    with pytest.raises(ValueError, match="not the clean run's batch"):
        run_edited(tiny_model, other, 1, clean.resid[1], clean)
