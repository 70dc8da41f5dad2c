"""Teaching's training data: read-out trees reproduce each read-out's own forward, targets sit
on the rotation's positions, each tree knows the tree of the turn before (the step loss's
pairs), environments without oracles are refused."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import pytest

from belieflens import envs
from belieflens.errors import ParameterError
from belieflens.readouts.render import bos_policy, render
from belieflens.train.teach import Stack, additive_mask, step_error
from belieflens.train.teach_data import (
    Tree,
    predecessors,
    target_on_positions,
    taught_records,
    trees,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

pytestmark = pytest.mark.usefixtures("one_thread")


def test_targets_follow_the_rotation() -> None:
    assert target_on_positions([0.7, 0.2, 0.1], [1, 2, 0]).tolist() == pytest.approx(
        [0.2, 0.1, 0.7])


def test_an_environment_without_oracles_is_refused() -> None:
    with pytest.raises(ParameterError, match="no option-level oracle"):
        taught_records(envs.get("dutch-book"), 1, 0)


def test_one_tree_per_episode_delivery_and_turn(smol_tokenizer: PreTrainedTokenizerBase) -> None:
    recs = taught_records(envs.get("coin-flip", turns=2), 2, 0)
    got = trees(smol_tokenizer, recs)
    assert len(got) == 2 * 2 * 3  # episodes x deliveries x turns
    assert sum(t.readouts for t in got) == len(recs)
    bos = bos_policy(smol_tokenizer)
    for t in got:  # every target is a distribution over the read-out's options
        assert np.allclose(t.target.sum(-1), 1.0) and (t.target[:, :2] > 0).all()
        group = [r for r in recs if (r.episode, r.delivery, r.turn) == t.key]
        prompts = sum(len(render(smol_tokenizer, r.query, bos=bos).context_ids) for r in group)
        assert t.tokens < 0.6 * prompts  # the shared conversation runs once
        probes = [r.probe for r in group]
        assert [probes[0] == p for p in probes] == (t.question == 0).tolist()
        assert np.array_equal(t.weights("readout"), np.ones(t.readouts))
        w = t.weights("question")  # each question the same total, whatever its rotations
        totals = [w[t.question == q].sum() for q in np.unique(t.question)]
        assert len(totals) == 2 and np.allclose(totals, 1.0)
        assert len(set(np.round(w, 9))) == 2  # next-flip's 2 rotations, bias's 5


@pytest.mark.parametrize("kind", ["llama", "gemma"])
def test_a_tree_reads_what_each_prompt_reads(smol_tokenizer: PreTrainedTokenizerBase,
                                             kind: str) -> None:
    """The option log-probs read from one masked forward of a tree equal those of each
    read-out's own prompt run alone (the answer position extraction reads); a Gemma 3 whose
    sliding layers see 4 positions too, so its window is counted in each prompt's own
    positions, not in the packed tree's."""
    import torch

    from tests.conftest import tiny_gemma, tiny_llama

    model = tiny_llama(smol_tokenizer) if kind == "llama" else tiny_gemma(smol_tokenizer)
    recs = taught_records(envs.get("coin-flip", turns=1), 1, 0)
    tree = trees(smol_tokenizer, recs)[1]
    assert tree.readouts == 7
    stack = Stack(model, 1)
    pos = torch.from_numpy(tree.positions)[None]
    mask = additive_mask(tree.mask())
    with torch.no_grad():
        lp = stack.top(stack.trunk(torch.from_numpy(tree.ids)[None], pos, mask), pos, mask,
                       torch.from_numpy(tree.reads))
    bos = bos_policy(smol_tokenizer)
    group = [r for r in recs if (r.episode, r.delivery, r.turn) == tree.key]
    for q, rec in enumerate(group):
        tq = render(smol_tokenizer, rec.query, bos=bos)
        with torch.no_grad():
            full = torch.log_softmax(model(torch.tensor([tq.context_ids])).logits[0, -1], -1)
        want = full[[c[0] for c in tq.option_ids]]
        k = int(tree.n_options[q])
        got = lp[tree.option_read[q, :k, 0], tree.option_token[q, :k, 0]]
        assert torch.allclose(got, want, atol=1e-4), (q, got, want)


def test_each_tree_steps_from_the_turn_before(smol_tokenizer: PreTrainedTokenizerBase) -> None:
    """A tree's predecessor is its episode's and delivery's tree one turn earlier, its
    read-outs the same questions under the same rotations; a mix's conditions are apart."""
    recs = taught_records(envs.get("coin-flip", turns=2), 2, 0)
    got = trees(smol_tokenizer, recs)
    before = predecessors(got)
    for i, t in enumerate(got):
        episode, delivery, turn = t.key
        if turn == 0:
            assert before[i] == -1
            continue
        prev = got[before[i]]
        assert prev.key == (episode, delivery, turn - 1)
        assert np.array_equal(prev.outcome, t.outcome) and np.array_equal(prev.question,
                                                                          t.question)
    bos = bos_policy(smol_tokenizer)
    for q, rec in enumerate(r for r in recs if (r.episode, r.delivery, r.turn) == got[0].key):
        assert got[0].outcome[q, : got[0].n_options[q]].tolist() == list(
            render(smol_tokenizer, rec.query, bos=bos).outcome)
    other = [dataclasses.replace(t, condition=1) for t in got]
    assert (predecessors(got + other)[len(got):] == np.where(before >= 0,
                                                              before + len(got), -1)).all()


def test_the_step_error_is_the_steps_difference(smol_tokenizer: PreTrainedTokenizerBase
                                                ) -> None:
    """Zero when the model's option log-probs are the targets' up to a constant per
    read-out; with the model standing still, a quarter of the target's squared step in
    log-odds for two options."""
    import torch

    recs = taught_records(envs.get("coin-flip", turns=1, probes="next-flip"), 1, 0)
    got = trees(smol_tokenizer, recs)
    i = int(np.flatnonzero(predecessors(got) >= 0)[0])
    tree, prev = got[i], got[int(predecessors(got)[i])]

    def logs(t: Tree, shift: float) -> torch.Tensor:
        return torch.log(torch.from_numpy(t.target)) + shift

    assert torch.allclose(step_error(logs(tree, 0.3), logs(prev, -1.0), tree, prev),
                          torch.zeros(tree.readouts, dtype=torch.float64))
    still = step_error(logs(prev, 0.0), logs(prev, 0.0), tree, prev)
    odds = np.log(tree.target[:, 0] / tree.target[:, 1]) - np.log(
        prev.target[:, 0] / prev.target[:, 1])
    assert np.allclose(still.numpy(), odds ** 2 / 4) and (odds != 0).all()
