"""BayesBench recommender import: exactly their world and their posterior; malformed files fail."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.envs.recommender.bayes import type_posterior
from belieflens.envs.recommender.bayesbench import load_world
from belieflens.envs.recommender.env import Recommender
from belieflens.errors import ImportFormatError

PEER = (
    Path(__file__).resolve().parents[3].parent / "shared" / "peers" / "bayesbench" / "recommender"
)
pytestmark = pytest.mark.skipif(not PEER.is_dir(), reason="peer data ../shared not present")


def _json(name: str) -> Any:
    return json.loads((PEER / name).read_text())


def independent_posterior(movie_ids: list[int], ratings: list[int]) -> list[float]:
    """Bayes' rule straight from their JSON, in plain Python."""
    fitted = _json("fitted_model.json")
    post = list(fitted["pi"])
    for mid, y in zip(movie_ids, ratings, strict=True):
        table = fitted["theta"][str(mid)]
        post = [post[k] * table[k][y - 1] for k in range(fitted["n_types"])]
    total = sum(post)
    return [p / total for p in post]


def test_world_is_theirs() -> None:
    w = load_world(PEER)
    fitted, sel = _json("fitted_model.json"), _json("movie_selection.json")
    assert w.n_types == fitted["n_types"] == 4
    assert np.allclose(w.pi, fitted["pi"])
    assert [w.movie_ids[m] for m in w.sequence] == [str(i) for i in sel["probe_movie_ids"]]
    assert [w.movie_ids[m] for m in w.targets] == [str(t["movie_id"]) for t in sel["target_movies"]]
    for t, m in zip(sel["target_movies"], w.targets, strict=True):
        assert np.allclose(w.phi[m], t["theta"])
        assert w.titles[m] == t["movie_name"]
    first = w.sequence[0]
    assert np.allclose(w.phi[first], fitted["theta"][w.movie_ids[first]])


def test_posterior_reproduced_for_fixed_ratings() -> None:
    w = load_world(PEER)
    sel = _json("movie_selection.json")
    ids = sel["probe_movie_ids"][:12]
    ratings = [5, 4, 1, 3, 2, 5, 5, 1, 4, 3, 2, 4]
    expected = independent_posterior(ids, ratings)
    got = type_posterior(w, list(w.sequence[:12]), ratings)
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-12)
    assert math.isclose(sum(got), 1.0)


def test_env_oracle_on_their_world() -> None:
    """Under prompt=profiles the world is theirs unrounded (prompt=bayesbench rounds it to
    the percentages it states: tests/envs/recommender/test_prompt.py)."""
    env = envs.get("recommender", world=str(PEER), turns=8, delivery="single-turn",
                   prompt="profiles")
    assert isinstance(env, Recommender)
    sel = _json("movie_selection.json")
    for ep in env.episodes(2, seed=4):
        ratings = [int(r) for r in str(ep.truth["ratings"]).split(",")]
        assert str(ep.truth["movies"]).split(",") == [str(i) for i in sel["probe_movie_ids"][:8]]
        for turn in ep.turns:
            t = turn.index
            expected = independent_posterior(sel["probe_movie_ids"][:t], ratings[:t])
            oracle = next(p.oracle for p in turn.probes if p.name == "type")
            assert oracle is not None
            assert np.allclose(oracle, expected, atol=1e-12)


def test_explicit_titles_are_theirs() -> None:
    env = envs.get("recommender", world=str(PEER), turns=1, titles="explicit",
                   delivery="single-turn")
    text = next(env.episodes(1, 0)).turns[1].messages["single-turn"][0].content
    assert "Cinderella (1950)" in text


def _copy(tmp_path: Path) -> Path:
    for name in ("fitted_model.json", "movie_selection.json"):
        shutil.copy(PEER / name, tmp_path / name)
    return tmp_path


def _edit(path: Path, fn: Any) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _set(key: str, value: Any) -> Any:
    return lambda d: d.__setitem__(key, value)


@pytest.mark.parametrize(
    ("file", "edit", "field"),
    [
        ("fitted_model.json", lambda d: d.pop("pi"), "'pi'"),
        ("fitted_model.json", _set("pi", [0.5, 0.5]), "'pi'"),
        ("fitted_model.json", _set("n_types", "four"), "'n_types'"),
        ("fitted_model.json", lambda d: d["theta"].__setitem__("1", [[0.2] * 5] * 3), "'theta.1'"),
        ("fitted_model.json", lambda d: d["theta"]["1"].__setitem__(0, [0.5] * 5), "'theta.1[0]'"),
        ("fitted_model.json", lambda d: d["theta"]["1"][0].__setitem__(0, "x"), "'theta.1[0][0]'"),
        (
            "movie_selection.json",
            lambda d: d["probe_movie_ids"].append(999999),
            "probe_movie_ids[50]",
        ),
        (
            "movie_selection.json",
            lambda d: d["target_movies"][1].pop("theta"),
            "target_movies[1].theta",
        ),
        ("movie_selection.json", _set("target_movies", []), "'target_movies'"),
    ],
)
def test_malformed_files_fail_with_one_line(
    tmp_path: Path, file: str, edit: Any, field: str
) -> None:
    root = _copy(tmp_path)
    _edit(root / file, edit)
    with pytest.raises(ImportFormatError) as info:
        load_world(root)
    msg = str(info.value)
    assert "\n" not in msg and str(root / file) in msg and field in msg


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "movie_selection.json").write_text("{not json")
    with pytest.raises(ImportFormatError, match="not valid JSON"):
        load_world(root)
    (root / "movie_selection.json").unlink()
    with pytest.raises(ImportFormatError, match="file not found"):
        envs.get("recommender", world=str(root))
