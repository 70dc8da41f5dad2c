"""The model's experiment choice as App. F.3.4 makes it: the experiment of largest expected
information gain under the model's own belief, with the world's likelihoods; here under its
debiased revealed belief (``sequence=model-revealed``; the stated one, the default, is tested
with the stated read-out)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.envs.protein_world.choice import eig_choice, parse_letter, revealed_belief
from belieflens.envs.protein_world.env import CLASS_Q, ProteinWorld
from belieflens.envs.protein_world.oracle import eig, experiment_grids
from belieflens.episodes.base import Message, Query
from belieflens.episodes.questions import mcq_probe


class Believes:
    """TEST DOUBLE: an OptionScorer whose class belief is ``belief`` (plus a strong bias for
    the first position, which debiasing cancels); it writes no text."""

    def __init__(self, belief: Sequence[float]) -> None:
        self.belief = np.log(np.asarray(belief))
        self.scored = 0

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        self.scored += len(queries)
        return tuple(tuple(float(self.belief[o]) + (3.0 if j == 0 else 0.0)
                           for j, o in enumerate(q.outcome)) for q in queries)

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        raise AssertionError("sequence=model chooses without text")


def test_the_revealed_belief_is_debiased_over_rotations() -> None:
    probe = mcq_probe("class", (Message("user", "x"),), CLASS_Q, ("a", "b", "c"), None,
                      "single-turn")
    got = revealed_belief(Believes([0.6, 0.3, 0.1]), probe)
    np.testing.assert_allclose(got, [0.6, 0.3, 0.1], atol=1e-12)


def test_the_model_runs_the_max_eig_experiment_under_its_own_belief() -> None:
    env = envs.get("protein-world", sequence="model-revealed", stated="off", steps=2,
                   delivery="single-turn")
    assert isinstance(env, ProteinWorld)
    world = env.world(np.random.default_rng([0, 0, 1]))
    grids = experiment_grids(world)
    k = len(world.classes)
    belief = np.full(k, 0.02 / (k - 2))
    belief[:2] = 0.49  # the model is torn between classes 0 and 1
    want = int(np.argmax([eig(belief, g) for g in grids]))
    uniform = int(np.argmax([eig(np.full(k, 1 / k), g) for g in grids]))
    assert want != uniform  # its belief, not the uniform prior, decides here
    model = Believes(belief.tolist())
    (ep,) = list(env.bind_generator(model).episodes(1, seed=0))
    assert str(ep.truth["experiments"]).split(",")[0] == str(want)
    assert ep.truth["choice_source_0"] == "eig-revealed" and model.scored == 2 * k  # k a step
    assert [ep.truth[f"choice_belief_0_{c}"] for c in range(k)] == pytest.approx(list(belief))
    gains = [ep.truth[f"choice_eig_0_{j}"] for j in range(len(grids))]
    assert int(np.argmax(gains)) == want


def test_a_belief_that_is_no_distribution_falls_back_and_is_recorded() -> None:
    env = envs.get("protein-world", sequence="model-revealed", stated="off", steps=1)
    assert isinstance(env, ProteinWorld)
    grids = experiment_grids(env.world(np.random.default_rng([0, 0, 1])))
    c = eig_choice(np.full(8, np.nan), grids, fallback=4, step=0)
    assert (c.experiment, c.source, c.truth) == (4, "fallback", {"choice_source_0": "fallback"})


def test_sequence_model_revealed_needs_a_scorer() -> None:
    class TextOnly:
        def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                     temperature: float) -> str:
            return "A"

    env = envs.get("protein-world", sequence="model-revealed", stated="off", steps=1)
    with pytest.raises(Exception, match="scores read-outs"):
        next(iter(env.bind_generator(TextOnly()).episodes(1, seed=0)))  # type: ignore[attr-defined]


@pytest.mark.parametrize(("reply", "want"), [
    ("B", 1), ("B.", 1), ("(C)", 2), ("Answer: A", 0), ("The answer is C.", 2),
    ("B reveal the exact value of Helix", 1), ("a", None), ("A protein with high Helix", None),
    ("Z", None), ("", None), ("I think so", None),
])
def test_mcq_replies_parse_strictly(reply: str, want: int | None) -> None:
    shown = ("reveal the exact value of Fold", "reveal the exact value of Helix",
             "reveal the exact value of Ligand")
    assert parse_letter(reply, shown) == want
