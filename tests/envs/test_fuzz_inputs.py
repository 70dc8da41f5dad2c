"""Fuzzing user input: environment parameters and imported JSON files.

Property: whatever the values, only the toolkit's own errors escape, with one
line; parameters accepted by ``get`` build an environment that yields episodes.
"""

from __future__ import annotations

import json
import math
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belieflens import envs
from belieflens.envs.belief_attribution.questions import load_questions, parse_questions
from belieflens.envs.dutch_book.scenarios import load_scenarios, parse_scenarios
from belieflens.envs.recommender.bayesbench import FITTED, SELECTION, load_world
from belieflens.errors import BeliefLensError, ImportFormatError, ParameterError

SPECIAL = ["none", "", "nan", "inf", "-inf", "-1", "0", "1", "2", "1e309", "true", "no", " ",
           "0x10", "1_000", "٣", "all", "listed"]

values = st.one_of(
    st.text(max_size=12), st.integers(-(10**6), 10**6), st.integers(-3, 8).map(str),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.sampled_from(SPECIAL),
)


def _small(v: object) -> bool:
    try:
        x = float(str(v))
    except ValueError:
        return True
    return not math.isfinite(x) or abs(x) <= 12


# derandomized: the same 150 draws in every run, so CI cannot turn red by the luck of one draw
# (a random draw found world_seed=-1 below; its case is now a test of the recommender)
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_environment_parameters_raise_only_parameter_errors(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(envs.names()))
    _, specs = envs.describe(name)
    names = [p.name for p in specs] + ["no_such_param"]
    chosen = data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    params = {}
    for key in chosen:
        spec = next((p for p in specs if p.name == key), None)
        choices = spec.type.split("|") if spec is not None and "|" in spec.type else []
        pool = st.one_of(values, st.sampled_from(choices)) if choices else values
        params[key] = data.draw(pool)
    try:
        env = envs.get(name, **params)
    except (ParameterError, ImportFormatError) as e:
        assert "\n" not in str(e) and str(e)
        return
    if getattr(env, "requires_generator", False):
        return  # needs a model to generate text: the CLI binds one before any work
    if all(_small(v) for v in params.values()):
        # accepted values must not fail later, once work has started
        for ep in islice(env.episodes(1, seed=0), 1):
            assert ep.turns


# --- importers -------------------------------------------------------------------------

QUESTIONS = {"questions": [
    {"id": "q1", "domain": "geo", "question": "Capital of France?", "answer": "Paris",
     "distractors": ["Lyon", "Nice"]},
    {"id": "q2", "domain": "geo", "question": "Capital of Italy?", "answer": "Rome",
     "distractors": ["Milan", "Turin"]},
]}
SCENARIOS = {"scenarios": [
    {"id": "n", "kind": "normalisation", "questions": ["Rain?", "Dry?"], "domain": "weather"},
    {"id": "m", "kind": "monotonicity", "questions": ["Above 40?", "Above 30?", "Above 20?"]},
]}
FITTED_JSON = {"n_types": 2, "pi": [0.5, 0.5],
               "theta": {"1": [[0.2] * 5, [0.1, 0.1, 0.2, 0.3, 0.3]],
                         "2": [[0.2] * 5, [0.3, 0.3, 0.2, 0.1, 0.1]]},
               "movie_names": {"1": "A", "2": "B", "3": "C"},
               "movie_genres": {"1": ["Drama"], "2": ["Comedy"], "3": []}}
SELECTION_JSON = {"probe_movie_ids": [1, 2],
                  "target_movies": [{"movie_id": 3, "theta": [[0.2] * 5, [0.2] * 5]}]}

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(10**400), 10**400),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
json_any = st.recursive(json_leaf, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)), max_leaves=6)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def mutate(doc: Any, data: st.DataObject) -> Any:
    """``doc`` with a few random edits: replace, delete or add at random paths."""
    doc = json.loads(json.dumps(doc))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = data.draw(st.sampled_from(paths))
        op = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            doc = data.draw(json_any) if op == "replace" else doc
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        if op == "replace":
            parent[last] = data.draw(json_any)
        elif op == "delete":
            del parent[last]
        elif isinstance(parent, dict):
            parent[data.draw(st.text(max_size=6))] = data.draw(json_any)
        else:
            parent.insert(last, data.draw(json_any))
    return doc


def _write(path: Path, doc: Any, data: st.DataObject) -> None:
    text = json.dumps(doc, allow_nan=True)
    if data.draw(st.integers(0, 9)) == 0:  # sometimes damage the text itself
        cut = data.draw(st.integers(0, len(text)))
        path.write_bytes(text[:cut].encode() + data.draw(st.binary(max_size=4)))
    else:
        path.write_text(text)


FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


def _only_import_errors(call: Any) -> None:
    try:
        call()
    except ImportFormatError as e:
        assert "\n" not in str(e) and str(e)


@FUZZ
@given(data=st.data())
def test_question_sets(tmp_path: Path, data: st.DataObject) -> None:
    doc = mutate(QUESTIONS, data)
    _only_import_errors(lambda: parse_questions(doc, "q.json"))
    _write(tmp_path / "q.json", doc, data)
    _only_import_errors(lambda: load_questions(tmp_path / "q.json"))


@FUZZ
@given(data=st.data())
def test_scenario_sets(tmp_path: Path, data: st.DataObject) -> None:
    doc = mutate(SCENARIOS, data)
    _only_import_errors(lambda: parse_scenarios(doc, "s.json"))
    _write(tmp_path / "s.json", doc, data)
    _only_import_errors(lambda: load_scenarios(tmp_path / "s.json"))


@FUZZ
@given(data=st.data())
def test_bayesbench_world(tmp_path: Path, data: st.DataObject) -> None:
    which = data.draw(st.sampled_from([FITTED, SELECTION]))
    _write(tmp_path / FITTED, mutate(FITTED_JSON, data) if which == FITTED else FITTED_JSON,
           data)
    (tmp_path / SELECTION).write_text(json.dumps(SELECTION_JSON))
    if which == SELECTION:
        _write(tmp_path / SELECTION, mutate(SELECTION_JSON, data), data)
    _only_import_errors(lambda: load_world(tmp_path))


def test_unmutated_fixtures_load(tmp_path: Path) -> None:
    assert len(parse_questions(QUESTIONS, "q")) == 2
    assert len(parse_scenarios(SCENARIOS, "s")) == 2
    (tmp_path / FITTED).write_text(json.dumps(FITTED_JSON))
    (tmp_path / SELECTION).write_text(json.dumps(SELECTION_JSON))
    assert len(load_world(tmp_path).targets) == 1


def test_invalid_utf8_is_an_import_error(tmp_path: Path) -> None:
    for loader in (load_questions, load_scenarios):
        f = tmp_path / "bad.json"
        f.write_bytes(b'{"questions": "\xff\xfe"}')
        with pytest.raises(ImportFormatError, match=r"bad\.json"):
            loader(f)
    assert issubclass(ImportFormatError, BeliefLensError)


def test_huge_numbers_and_deep_nesting_are_import_errors(tmp_path: Path) -> None:
    f = tmp_path / "deep.json"
    f.write_text('{"questions": ' + "[" * 100_000)
    with pytest.raises(ImportFormatError, match=r"deep\.json"):
        load_questions(f)
    f.write_text('{"scenarios": [' + "9" * 5000 + "]}")
    with pytest.raises(ImportFormatError, match="not valid JSON"):
        load_scenarios(f)
    fitted = json.loads(json.dumps(FITTED_JSON))
    fitted["pi"] = [10**400, 0]
    (tmp_path / FITTED).write_text(json.dumps(fitted))
    (tmp_path / SELECTION).write_text(json.dumps(SELECTION_JSON))
    with pytest.raises(ImportFormatError, match=r"field 'pi\[0\]'"):
        load_world(tmp_path)
