"""ProteinWorld as the paper runs it (From Prompts to Posteriors, App. F.3): the model
chooses the experiments, states its posterior at τ = 1.0, unparsed replies are retried and
counted, the class MCQ asks for the model's belief, and the report sets the stated read-out
beside the revealed one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from belieflens import envs
from belieflens.envs.protein_world.env import CLASS_Q, ProteinWorld, prior_text
from belieflens.envs.protein_world.metrics import choice_counts, step_metrics, step_summary
from belieflens.envs.protein_world.oracle import eig, experiment_grids
from belieflens.envs.protein_world.report import format_steps, protein_world_section
from belieflens.envs.protein_world.stated import ASK, SYSTEM, parse_stated
from belieflens.episodes.base import Message, Query
from belieflens.errors import ParameterError
from tests.analysis.synthetic_cache import Row, cache_dataset, mcq_rows

PAPER = {
    # §4.2, the first of three trajectories
    "choose": ("We use the LLM to update beliefs ${p}^{\\,k}_{\\text{LLM}}$ and choose "
               "experiments."),
    # App. F.3.2
    "stated": ("asked to output the posterior probability distribution across $\\Theta$, "
               "recorded as verbalized probabilities, sampled at temperature $\\tau=1.0$"),
    "retry": ("In case that the output does not fit the required format, generation is "
              "attempted twice more using the same prompts and a different seed."),
    "system": "System: You are an expert in the following fictional protein world:",
    "prior": ("User: You can assume that initially, this probability distribution over the "
              "protein classes held:"),
}
PAPER_TEXT = (Path(__file__).parents[4] / "shared" / "papers" / "prompts-to-posteriors.txt")


def test_the_quotes_are_the_papers() -> None:
    if not PAPER_TEXT.is_file():
        pytest.skip("the papers are not beside this checkout")
    text = PAPER_TEXT.read_text(encoding="utf-8")
    for quote in PAPER.values():
        assert quote in text, quote


def test_the_paper_preset_lets_the_model_choose_and_state() -> None:
    p = envs.get("protein-world").params
    assert (p.sequence, p.stated, p.unparsed) == ("model", "sampled", "retry")  # type: ignore[attr-defined]
    q = envs.get("protein-world", preset="belieflens").params
    assert (q.sequence, q.stated) == ("random", "off")  # type: ignore[attr-defined]
    env = envs.get("protein-world", sequence="random")
    assert env.requires_generator  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="stated=sampled"):
        next(iter(env.episodes(1, seed=0)))
    assert not envs.get("protein-world", sequence="random",
                        stated="off").requires_generator  # type: ignore[attr-defined]


def test_the_class_question_asks_for_the_models_belief() -> None:
    assert "most likely" not in CLASS_Q and "believe" in CLASS_Q


@pytest.mark.parametrize(("reply", "want"), [
    ("Vorin: 0.6\nDase: 0.2\nKulin: 0.2", (0.6, 0.2, 0.2)),
    ("Vorin: 60%\nDase: 20%\nKulin: 20%", (0.6, 0.2, 0.2)),
    ("**Kulin**: 0.5\n- dase: .25\n1. Vorin = 0.25", (0.25, 0.25, 0.5)),
    ("Vorin: 0.3\nDase: 0.3\nKulin: 0.2", (0.375, 0.375, 0.25)),  # normalised
])
def test_a_stated_distribution_is_parsed(reply: str, want: tuple[float, ...]) -> None:
    got = parse_stated(reply, ("Vorin", "Dase", "Kulin"))
    assert got is not None and got[0] == pytest.approx(want)


@pytest.mark.parametrize("reply", [
    "", "I think Vorin.", "Vorin: 0.6\nDase: 0.4",  # a class missing
    "Vorin: 0.6\nVorin: 0.2\nDase: 0.1\nKulin: 0.1",  # a class twice
    "Vorin: 1.5\nDase: 0.2\nKulin: 0.2",  # not a probability
    "Vorin: 0\nDase: 0\nKulin: 0",
])
def test_a_reply_out_of_format_does_not_parse(reply: str) -> None:
    assert parse_stated(reply, ("Vorin", "Dase", "Kulin")) is None


class _Model:
    """Picks option A greedily, scores every read-out's first position highest (a position
    bias that debiasing cancels); states ``replies`` in turn (then the last one forever)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.stated: list[tuple[tuple[Message, ...], int, float]] = []

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        if messages[0].role != "system":
            assert temperature == 0.0
            return "A"
        self.stated.append((messages, seed, temperature))
        return self.replies[min(len(self.stated) - 1, len(self.replies) - 1)]

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        return tuple(tuple(-1.0 - j for j in range(len(q.options))) for q in queries)


def _env(**kw: object) -> ProteinWorld:
    settings: dict[str, object] = dict(classes=3, attributes=2, steps=1, delivery="single-turn")
    env = envs.get("protein-world", **(settings | kw))
    assert isinstance(env, ProteinWorld)
    return env


def test_the_stated_posterior_is_sampled_at_tau_1_and_retried_twice() -> None:
    assert "twice more" in PAPER["retry"] and "tau=1.0" in PAPER["stated"]
    env = _env()
    world = env.world(np.random.default_rng([0, 0, 1]))
    good = "\n".join(f"{c}: {p}" for c, p in zip(world.classes, (0.5, 0.3, 0.2), strict=True))
    model = _Model(["no idea", "Maybe the first one.", good])
    (ep,) = env.bind_generator(model).episodes(1, seed=0)
    # turn 0: two unparsed replies, the third parses; turn 1: the good reply at once
    assert [ep.truth[f"stated_attempts_{t}"] for t in (0, 1)] == [3.0, 1.0]
    assert [ep.truth[f"stated_valid_{t}"] for t in (0, 1)] == [1.0, 1.0]
    assert [ep.truth[f"stated_0_{c}"] for c in range(3)] == pytest.approx([0.5, 0.3, 0.2])
    assert {t for _, _, t in model.stated} == {1.0}
    seeds = [s for _, s, _ in model.stated]
    assert len(set(seeds)) == len(seeds) == 4  # another seed for every attempt, none sampled twice
    system, user = model.stated[0][0]
    assert system.content.startswith(PAPER["system"].removeprefix("System: "))
    assert system.content.startswith(SYSTEM) and "Table 1" in system.content
    # the template's user turn holds the prior (App. F.3.2), the system prompt does not
    assert PAPER["prior"].removeprefix("User: ") in user.content
    assert user.content == f"{prior_text(world)}\n\nNo experiments yet.\n\n{ASK}"
    assert "You can assume" not in system.content
    assert "Experiment 1:" in model.stated[-1][0][1].content


def test_the_model_chooses_by_eig_under_its_stated_posterior() -> None:
    """p_LLM of App. F.3.4's choice is the verbalised posterior (F.3.2), read at the same turn
    and recorded; the revealed belief (uniform here, once debiased) would choose otherwise."""
    env = _env(classes=4, attributes=3, steps=2)
    world = env.world(np.random.default_rng([0, 0, 1]))
    grids = experiment_grids(world)
    belief = [0.01, 0.49, 0.49, 0.01]
    want = int(np.argmax([eig(np.asarray(belief), g) for g in grids]))
    uniform = int(np.argmax([eig(np.full(4, 0.25), g) for g in grids]))
    assert want != uniform
    good = "\n".join(f"{c}: {p}" for c, p in zip(world.classes, belief, strict=True))
    (ep,) = env.bind_generator(_Model([good])).episodes(1, seed=0)
    assert ep.truth["choice_source_0"] == "eig-stated"
    assert str(ep.truth["experiments"]).split(",")[0] == str(want)
    assert [ep.truth[f"choice_belief_0_{c}"] for c in range(4)] == pytest.approx(belief)
    assert [ep.truth[f"stated_0_{c}"] for c in range(4)] == pytest.approx(belief)
    # a reply that never parses: the seeded draw stands in, counted
    (ep,) = env.bind_generator(_Model(["no idea"])).episodes(1, seed=0)
    assert ep.truth["choice_source_0"] == "fallback" and ep.truth["stated_valid_0"] == 0.0
    counts = choice_counts(cache_dataset(_choice_rows(("eig-stated", "fallback", "eig"))))
    assert (int(counts["eig_stated"]), int(counts["fallback"]), int(counts["eig_revealed"])) == (
        1, 1, 1)


def _choice_rows(sources: Sequence[str]) -> list[Row]:
    """One episode per choice source, its turn-0 class read-out and ``choice_source_0``."""
    rows: list[Row] = []
    for e, source in enumerate(sources):
        truth: dict[str, float | str] = {"theta_index": 0.0, "choice_source_0": source}
        rows += mcq_rows([0.5, 0.5], episode=e, turn=0, probe="class", labels=("a", "b"),
                         delivery="single-turn", truth=truth, oracle=[0.5, 0.5])
    return rows


def test_sequence_model_needs_the_stated_posterior_and_unknown_ones_are_listed() -> None:
    with pytest.raises(ParameterError, match="stated=sampled, or sequence=model-revealed"):
        envs.get("protein-world", sequence="model", stated="off")
    with pytest.raises(ParameterError) as err:
        envs.get("protein-world", sequence="model-stated")
    assert "\n" not in str(err.value)
    for name in ("random", "cycle", "active", "model", "model-revealed", "model-mcq"):
        assert name in str(err.value)
    assert envs.get("protein-world", preset="belieflens",
                    sequence="model").params.stated == "sampled"  # type: ignore[attr-defined]


def test_an_unparsed_reply_is_counted_not_dropped() -> None:
    model = _Model(["no idea"])
    (ep,) = _env(unparsed="count").bind_generator(model).episodes(1, seed=0)
    assert len(model.stated) == 2  # one attempt per turn under count
    assert [ep.truth[f"stated_valid_{t}"] for t in (0, 1)] == [0.0, 0.0]
    assert all(math.isnan(float(ep.truth[f"stated_{t}_{c}"])) for t in (0, 1) for c in range(3))
    (again,) = _env().bind_generator(_Model(["no idea"])).episodes(1, seed=0)
    assert again.truth["stated_attempts_0"] == 3.0 and again.truth["stated_valid_0"] == 0.0


CLASSES = ("Vorin", "Dase", "Kulin")


def _rows() -> list[Row]:
    """Two episodes, two turns; episode 1's stated reply at turn 1 did not parse."""
    oracle = [[0.4, 0.4, 0.2], [0.8, 0.1, 0.1]]
    model = [[0.5, 0.3, 0.2], [0.6, 0.2, 0.2]]
    stated = {(0, 0): [0.4, 0.4, 0.2], (0, 1): [0.5, 0.25, 0.25], (1, 0): [0.2, 0.4, 0.4]}
    rows: list[Row] = []
    for e in range(2):
        truth: dict[str, float | str] = {"theta_index": 0.0, "p_active_true_0": 0.4,
                                         "p_active_true_1": 0.9}
        for t in range(2):
            got = stated.get((e, t))
            truth[f"stated_valid_{t}"] = float(got is not None)
            for c in range(3):
                truth[f"stated_{t}_{c}"] = got[c] if got else float("nan")
        for t in range(2):
            rows += mcq_rows(model[t], episode=e, turn=t, probe="class", labels=CLASSES,
                             oracle=oracle[t], truth=truth)
    return rows


def _kl(p: list[float], q: list[float]) -> float:
    return float(sum(a * np.log(a / b) for a, b in zip(p, q, strict=True)))


def test_the_report_sets_stated_beside_revealed() -> None:
    ds = cache_dataset(_rows())
    m = step_metrics(ds).sel(delivery="single-turn")
    want = [[0.0, _kl([0.8, 0.1, 0.1], [0.5, 0.25, 0.25])],
            [_kl([0.4, 0.4, 0.2], [0.2, 0.4, 0.4]), np.nan]]
    np.testing.assert_allclose(m["kl_stated"].values, want, atol=1e-12)
    np.testing.assert_allclose(m["kl"].sel(turn=1).values, [_kl([0.8, 0.1, 0.1],
                                                                [0.6, 0.2, 0.2])] * 2)
    np.testing.assert_allclose(m["stated_parsed"].values, [[1, 1], [1, 0]])
    np.testing.assert_allclose(m["p_stated_true"].sel(turn=1).values, [0.5, np.nan])
    sec = protein_world_section(ds, None, method="geometric")
    assert "stated replies parsed: 3 of 4" in sec.text
    assert "KL(oracle‖stated)" in sec.text and "KL(oracle‖revealed)" in sec.text
    assert "0.500" in sec.text  # turn 1's parsed share: the unparsed reply counts


def test_the_reports_first_measure_is_kl_stated() -> None:
    """The paper's posterior fidelity is the verbalised posterior's (App. F.3.2): the report's
    first column and first panel are KL(oracle ‖ stated), the revealed KL beside it."""
    ds = cache_dataset(_rows())
    summary = step_summary(step_metrics(ds))
    table = format_steps(summary).splitlines()
    head = table[1].split()
    assert head[:3] == ["step", "n", "KL(oracle‖stated)"] and head[3] == "KL(oracle‖revealed)"
    for line in table[2:4]:
        t = int(line.split()[0])
        s = summary.sel(delivery="single-turn", turn=t)
        mean, sem = float(s["kl_stated_mean"]), float(s["kl_stated_sem"])
        assert line.split()[2] == (f"{mean:.3f}" + (f"±{sem:.3f}" if np.isfinite(sem) else ""))
    text = protein_world_section(ds, None, method="geometric").text
    assert text.startswith("KL(oracle ‖ stated), the paper's measure")


def test_the_gap_is_the_stated_posteriors_with_the_revealed_beside(tmp_path: Path) -> None:
    """Fig. 4's downstream gap p_ora-act(θ*) − p_LLM(θ*) takes the posterior the model states
    (App. F.3.2); the revealed one is shown beside it."""
    ds = cache_dataset(_rows())
    m = step_metrics(ds).sel(delivery="single-turn")
    np.testing.assert_allclose(m["gap_stated"].sel(turn=1).values, [0.9 - 0.5, np.nan])
    np.testing.assert_allclose(m["gap_revealed"].sel(turn=1).values, [0.9 - 0.6] * 2)
    sec = protein_world_section(ds, tmp_path, method="geometric")
    assert sec.text.index("p_act−p_stated(θ*)") < sec.text.index("p_act−p_rev(θ*)")
    assert sec.files == (tmp_path / "protein_world_steps.png",)


def test_exact_zeros_in_a_stated_posterior_are_floored_and_counted() -> None:
    """A stated 0 where the oracle keeps mass makes KL(oracle ‖ stated) infinite; it is
    floored at 1e-12, said so, and the replies giving θ* zero mass are counted."""
    import dataclasses

    rows = []
    for r in _rows():  # episode 0 states (1, 0, 0) at turn 1: θ* is class 0, so only support
        zeros = ({"stated_1_0": 1.0, "stated_1_1": 0.0, "stated_1_2": 0.0} if r.episode == 0
                 else {"stated_0_0": 0.0, "stated_0_1": 0.5, "stated_0_2": 0.5})  # θ* zero
        rows.append(dataclasses.replace(r, truth={**r.truth, **zeros}))
    ds = cache_dataset(rows)
    m = step_metrics(ds).sel(delivery="single-turn")
    nan = float("nan")
    np.testing.assert_allclose(m["stated_zero_truth"].values, [[0.0, 0.0], [1.0, nan]])
    np.testing.assert_allclose(m["stated_zero_support"].values, [[0.0, 1.0], [1.0, nan]])
    floor = 0.1 * np.log(0.1 / 1e-12) * 2 + 0.8 * np.log(0.8)
    assert float(m["kl_stated"].sel(episode=0, turn=1)) == pytest.approx(floor)
    sec = protein_world_section(ds, None, method="geometric")
    assert "floored at 1e-12" in sec.text
    assert "3 of 4 (1 of the parsed give θ* zero mass, 2 give zero mass to a class" in sec.text
