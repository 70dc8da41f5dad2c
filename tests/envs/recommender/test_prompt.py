"""The recommender as BayesBench prompts it (Sec. 3, App. 10): the model is told every
type's share and rating distributions, exactly the numbers the oracle conditions on;
movies are abstract labels without genres by default; the earlier prompt stays by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import belieflens.envs as envs
from belieflens.cli.main import app
from belieflens.envs.recommender.env import Recommender
from belieflens.envs.recommender.shown import round_distribution, shown_world
from belieflens.envs.recommender.synthetic import default_world, load_titles
from belieflens.episodes.base import Message

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "recommender_bayesbench.json")
                     .read_text(encoding="utf-8"))
PEER = (
    Path(__file__).resolve().parents[3].parent / "shared" / "peers" / "bayesbench" / "recommender"
)


def _stated(text: str) -> tuple[list[float], dict[str, list[list[float]]]]:
    """Read the shares and the rating distributions back from the prompt text alone."""
    shares = [float(x) / 100 for x in re.findall(r"^- Type \d+: ([\d.]+)%$", text, re.M)]
    tables: dict[str, list[list[float]]] = {}
    movie = ""
    for line in text.splitlines():
        if re.fullmatch(r"Movie \d+:", line):
            movie = line[:-1]
            tables[movie] = []
        elif movie and line.startswith("- Type ") and "stars" in line:
            tables[movie].append([float(x) / 100 for x in re.findall(r"([\d.]+)%", line)])
    return shares, tables


def _posterior_from_text(text: str) -> list[float]:
    """Bayes' rule on the numbers the prompt states and the ratings it reports."""
    shares, tables = _stated(text)
    post = list(shares)
    for movie, stars in re.findall(r"^- (Movie \d+): (\d) stars?$", text, re.M):
        post = [post[k] * tables[movie][k][int(stars) - 1] for k in range(len(post))]
    total = sum(post)
    return [p / total for p in post]


@pytest.mark.parametrize("world", ["default", "peer"])
def test_the_oracle_conditions_on_exactly_what_the_prompt_states(world: str) -> None:
    if world == "peer" and not PEER.is_dir():
        pytest.skip("peer data ../shared not present")
    params = {"world": str(PEER)} if world == "peer" else {}
    env = envs.get("recommender", turns=6, delivery="single-turn", **params)
    assert isinstance(env, Recommender)
    for ep in env.episodes(3, seed=2):
        for turn in ep.turns:
            text = turn.messages["single-turn"][0].content
            shares, tables = _stated(text)
            assert len(shares) == FIXTURE["K"] and sum(shares) == pytest.approx(1.0, abs=1e-12)
            assert len(tables) == 7  # the six rated movies and the target
            assert all(len(t) == FIXTURE["K"] and all(len(r) == 5 for r in t)
                       for t in tables.values())
            oracle = next(p.oracle for p in turn.probes if p.name == "type")
            assert oracle is not None
            assert np.allclose(oracle, _posterior_from_text(text), rtol=1e-12, atol=1e-15)
            target = re.search(r"give (Movie \d+)\?", turn.probes[1].queries[0].messages[-1]
                               .content)
            assert target is not None
            for k in range(FIXTURE["K"]):  # the type-conditional oracle is the stated table
                cond = next(p.oracle for p in turn.probes if p.name == f"rating|type={k}")
                assert cond is not None
                assert np.allclose(cond, tables[target.group(1)][k], rtol=0, atol=1e-15)


def test_shares_are_stated_exactly_not_about() -> None:
    env = envs.get("recommender", turns=2, delivery="single-turn", decimals=3)
    text = next(env.episodes(1, seed=0)).turns[0].messages["single-turn"][0].content
    assert "about" not in text
    w = env.world  # type: ignore[attr-defined]
    for k, p in enumerate(w.pi):
        assert f"- Type {k + 1}: {100 * p:.3f}%" in text
    assert np.allclose(w.pi * 1e5, np.round(w.pi * 1e5), atol=1e-6)  # what is stated, no more


def test_anonymised_labels_without_genres_by_default() -> None:
    """BayesBench: "movie titles are replaced with abstract labels, so the model can only
    reason from rating distributions"; the explicit condition retains titles and genres."""
    assert "abstract labels" in FIXTURE["anonymised"]
    names = load_titles()
    env = envs.get("recommender", turns=4, delivery="single-turn")
    text = next(env.episodes(1, seed=1)).turns[4].messages["single-turn"][0].content
    assert not any(t in text for t, _ in names.titles)
    assert not any(g in text for g in names.genres)
    assert "likes" not in text  # no genre profiles: only the rating distributions
    explicit = envs.get("recommender", turns=4, delivery="single-turn", titles="explicit")
    text = next(explicit.episodes(1, seed=1)).turns[4].messages["single-turn"][0].content
    assert any(f"{t} (" in text for t, _ in names.titles)


def test_the_default_delivery_is_the_papers_self_anchored_one() -> None:
    """BayesBench, App. 10: "The main paper reports results under multi-turn self-anchored
    delivery": by default the model writes its own reply after every rating; the other
    deliveries stay options."""
    assert "multi-turn self-anchored delivery" in FIXTURE["delivery"]
    env = envs.get("recommender", turns=2)
    assert isinstance(env, Recommender)
    assert env.params.delivery == "multi-turn-self" and env.requires_generator

    def reply(messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
              temperature: float) -> str:
        return f"So far {len(messages)} messages."

    ep = next(env.bind_generator(reply).episodes(1, seed=0))
    conv = ep.turns[2].messages["multi-turn-self"]
    assert [m.role for m in conv] == ["user", "assistant"] * 3
    assert conv[-1].content == "So far 5 messages."  # the model's own reply, in context
    assert {p.delivery for p in ep.turns[2].probes} == {"multi-turn-self"}
    for other in ("single-turn", "multi-turn", "all", "all+self"):
        assert envs.get("recommender", delivery=other).params.delivery == other  # type: ignore[attr-defined]


def test_the_earlier_prompt_stays_by_name() -> None:
    env = envs.get("recommender", turns=2, delivery="single-turn", prompt="profiles",
                   titles="anonymised+genres")
    text = next(env.episodes(1, seed=0)).turns[0].messages["single-turn"][0].content
    assert "(about " in text and "likes" in text and "1 star " not in text
    assert np.array_equal(env.world.pi, default_world(0).pi)  # type: ignore[attr-defined]


def test_rounding_keeps_every_distribution_whole() -> None:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(5), size=(50, 4))
    for d in (0, 1, 3):
        units = round_distribution(p, d)
        assert np.all(units.sum(-1) == 100 * 10**d)
        assert np.all(np.abs(units / (100 * 10**d) - p) < 10.0 ** -(2 + d))  # within one unit
    w = shown_world(default_world(1), 1)
    assert np.allclose(w.phi.sum(-1), 1.0, atol=1e-12) and np.allclose(w.pi.sum(), 1.0)
    assert np.allclose(w.phi * 1000, np.round(w.phi * 1000), atol=1e-9)


@pytest.mark.parametrize("setting", ["prompt=verbatim", "titles=real", "decimals=9"])
def test_bad_prompt_settings_exit_2_and_write_nothing(tmp_path: Path, setting: str) -> None:
    out = tmp_path / "study.h5"
    result = CliRunner().invoke(app, ["extract", "recommender", "--set", setting,
                                      "--out", str(out)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and setting.split("=")[0] in lines[0]
    assert not any(tmp_path.iterdir())
