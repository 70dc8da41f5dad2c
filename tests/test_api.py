"""The top level: ``belieflens.load`` / ``extract`` on the tiny random model, one-line errors."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import pytest

import belieflens
from belieflens import api
from belieflens.api import ExtractEvent, ModelLoaded
from belieflens.errors import BeliefLensError, ModelNotFoundError, ParameterError
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions, Progress
from belieflens.run.lifecycle import write_cache
from tests.conftest import assert_same_data

pytestmark = pytest.mark.usefixtures("one_thread")

VARYING = {"created", "git_commit", "model_load_seconds"}
"""Root attributes that differ between two runs of the same study."""


def _attrs(path: Path) -> dict[str, str]:
    with h5py.File(path) as h:
        return {k: str(v) for k, v in h.attrs.items() if k not in VARYING}


def test_extract_by_name_equals_the_cache_layer(tiny_model: LoadedModel, tmp_path: Path) -> None:
    events: list[ExtractEvent] = []
    path = belieflens.extract(
        "coin-flip", params={"turns": 1, "delivery": "multi-turn"}, model=tiny_model,
        out=tmp_path / "api.h5", episodes=1, on_event=events.append,
    )
    assert path == tmp_path / "api.h5"
    env = belieflens.envs.get("coin-flip", turns=1, delivery="multi-turn")
    ref = write_cache(env, tiny_model, tmp_path / "ref.h5", ExtractOptions(episodes=1))
    assert_same_data(ref, path)
    assert _attrs(ref) == _attrs(path)
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress and progress[-1].done == progress[-1].total
    assert not any(isinstance(e, ModelLoaded) for e in events)  # the model was loaded already
    with belieflens.open_cache(path) as ds:
        assert ds.sizes["query"] == progress[-1].total


def test_extract_loads_a_model_folder_and_restores_logging(
    tiny_dir: Path, tmp_path: Path
) -> None:
    root = logging.getLogger()
    before = root.level
    events: list[ExtractEvent] = []
    path = belieflens.extract(
        belieflens.envs.get("coin-flip", turns=1, delivery="single-turn"), model=str(tiny_dir),
        out=tmp_path / "x.h5", episodes=1, batch_size="auto", kernels="default",
        on_event=events.append,
    )
    loaded = [e for e in events if isinstance(e, ModelLoaded)]
    assert [e.role for e in loaded] == ["model"] and loaded[0].info.kernels == "default"
    assert root.level == before
    with h5py.File(path) as h:
        assert '"max_rows": 0' in h.attrs["extract_options"]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"env": "roulette"}, "unknown environment 'roulette'"),
        ({"params": {"turns": -1}}, "'turns'"),
        ({"model": "nope"}, "unknown model 'nope'"),
        ({"simulator": "/no/such.gguf"}, "GGUF file not found"),
        ({"batch_size": 0}, "'--batch-size' = 0"),
        ({"episodes": 0}, "'--episodes' = 0"),
        ({"device": "tpu"}, "'--device' = 'tpu'"),
        ({"padding": "middle"}, "'--padding' = 'middle'"),
    ],
)
def test_bad_input_is_one_line_before_any_work(
    kwargs: dict[str, Any], fragment: str, tmp_path: Path
) -> None:
    args: dict[str, Any] = {"env": "coin-flip", "out": tmp_path / "x.h5", **kwargs}
    with pytest.raises(BeliefLensError) as e:
        belieflens.extract(**args)
    assert fragment in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_params_need_an_environment_name(tmp_path: Path) -> None:
    env = belieflens.envs.get("coin-flip")
    with pytest.raises(ParameterError, match="pass its name"):
        belieflens.extract(env, params={"turns": 2}, out=tmp_path / "x.h5")


def test_existing_output_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    out.write_bytes(b"precious")
    with pytest.raises(ParameterError, match="--overwrite"):
        belieflens.extract("coin-flip", out=out)
    assert out.read_bytes() == b"precious"


@pytest.mark.parametrize("spec", ["nope", "/no/such/model.gguf"])
def test_load_of_an_unknown_model(spec: str) -> None:
    with pytest.raises(ModelNotFoundError):
        belieflens.load(spec)


def test_load_of_unreadable_weights_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "model.safetensors").write_bytes(b"\0\0")
    with pytest.raises(ModelNotFoundError, match="could not be loaded") as e:
        belieflens.load(tmp_path)
    assert "\n" not in str(e.value)


def test_import_is_light() -> None:
    code = ("import sys, belieflens; heavy = {'torch', 'transformers', 'transformer_lens'}; "
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_top_level_names() -> None:
    for name in ("load", "extract", "train_lens", "open_cache", "envs", "BeliefLensError",
                 "__version__", "analyze", "verify", "merge", "info", "compare", "patch",
                 "steer", "erase", "environments", "models", "ExtractOptions", "Selection",
                 "PatchOptions", "SteerOptions", "EraseOptions"):
        assert hasattr(belieflens, name), name
    assert set(belieflens.__all__) <= set(dir(belieflens))


def test_the_facade_exports_what_it_lists() -> None:
    assert set(api.__all__) <= set(dir(api))
    for name in set(belieflens.__all__) - {"envs", "__version__", "BeliefLensError"}:
        assert getattr(belieflens, name) is getattr(api, name), name


def test_extract_takes_an_options_record_or_its_keywords_not_both(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="not both"):
        belieflens.extract("coin-flip", out=tmp_path / "x.h5",
                           options=ExtractOptions(episodes=2), episodes=2)
    with pytest.raises(ParameterError, match="'--window' = 0"):
        belieflens.extract("coin-flip", out=tmp_path / "x.h5", window=0)
    assert list(tmp_path.iterdir()) == []


def test_extract_with_an_options_record(tiny_model: LoadedModel, tmp_path: Path) -> None:
    env = belieflens.envs.get("coin-flip", turns=1, delivery="single-turn")
    by_record = belieflens.extract(env, model=tiny_model, out=tmp_path / "a.h5",
                                   options=ExtractOptions(episodes=1, max_rows=3))
    by_keywords = belieflens.extract(env, model=tiny_model, out=tmp_path / "b.h5",
                                     episodes=1, batch_size=3)
    assert_same_data(by_record, by_keywords)
    assert _attrs(by_record) == _attrs(by_keywords)


def test_environments_list_their_parameters_and_grid_counts() -> None:
    listed = {e.name: e for e in belieflens.environments()}
    assert set(listed) == set(belieflens.envs.names())
    coin = listed["coin-flip"]
    assert coin.doc and "turns" in {p.name for p in coin.params} and coin.counts is None
    assert any(e.counts is not None for e in listed.values())  # the revealed-belief grids


def test_models_lists_the_embedded_models() -> None:
    assert "smollm2-135m" in {m.name for m in belieflens.models()}


@pytest.mark.parametrize("call", ["analyze", "compare_report"])
def test_debias_is_checked_by_the_facade(call: str, tmp_path: Path) -> None:
    f = tmp_path / "x.h5"
    with pytest.raises(ParameterError, match="'--debias' = 'median'"):
        if call == "analyze":
            api.analyze(f, debias="median")  # type: ignore[arg-type]
        else:
            api.compare_report([f, f], debias="median")  # type: ignore[arg-type]


def test_every_function_of_the_facade_is_exported_from_the_package() -> None:
    """``belieflens.NAME`` for each command's call of the facade (``compare_report`` too)."""
    for name in ("analyze", "compare", "compare_report", "extract", "models", "train_lens"):
        assert getattr(belieflens, name) is getattr(api, name)
        assert name in belieflens.__all__
