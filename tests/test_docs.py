"""The documentation cannot rot.

1. Every Python and shell block of the hand-written docs (``docs/**/*.md``) and of the README
   is run by a test or marked, on the line before it, as not run with a reason:

   - ``<!-- not run: REASON -->``: not run (REASON says why: a cluster, minutes of work, ...);
   - ``<!-- run by: tests/FILE.py -->``: run by that test (the README's walk-throughs,
     ``tests/test_readme.py``);
   - no mark (docs pages only): run here, by :func:`test_page_blocks_run`, every block of the
     page in order in one folder holding the study of Getting started (``study.h5``), Python
     blocks in one namespace, shell blocks with ``bash -euo pipefail``.

   Every fenced block names its language (``text`` for output), so none escapes the rule.
2. Every public name has a docstring with an example (an ``Example`` section or ``>>>``):
   every name in ``belieflens.__all__``, every ``ds.bl`` method and every environment class.
3. Those docstrings' examples run as doctests, and so do the examples of the module
   docstrings that head API reference pages (``belieflens``, ``belieflens.analysis.accessor``):
   the environment classes' without a model, the others next to the study of Getting started
   on the embedded model. An example that is not run says so (``+SKIP`` and "not run").
"""

from __future__ import annotations

import doctest
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from belieflens.model.load import LoadedModel

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GENERATED = {DOCS / "models" / "compare.md", DOCS / "models" / "compare_floor.md"}
"""Pages a command wrote (``belieflens compare``): their blocks are its output."""
CODE = {"python", "py", "pycon", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                   re.M | re.S)
MARK = re.compile(r"^<!-- (?P<kind>not run|run by): (?P<what>.*?) -->$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown page."""

    page: Path
    line: int
    language: str
    body: str
    mark: tuple[str, str] | None

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` with the mark on the line before each (if any)."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        mark = MARK.match(before)
        info = m["info"].strip().strip("{}").strip()
        language = info.split()[0].lstrip(".") if info else ""
        out.append(Block(page, text.count("\n", 0, m.start()) + 1, language, m["body"],
                         (mark["kind"], mark["what"].strip()) if mark else None))
    return out


def pages() -> list[Path]:
    """The hand-written pages: docs/**/*.md but the generated ones."""
    return sorted(p for p in DOCS.rglob("*.md") if p not in GENERATED)


def run_pages() -> list[Path]:
    """The docs pages with at least one block this module runs."""
    return [p for p in pages() if any(b.language in CODE and b.mark is None for b in blocks(p))]


def test_every_code_block_is_run_or_marked() -> None:
    problems = []
    for page in [*pages(), ROOT / "README.md"]:
        for b in blocks(page):
            if not b.language:
                problems.append(f"{b.where()}: a fenced block without a language (use `text` "
                                "for output)")
            if b.language not in CODE:
                continue
            if b.mark is None:
                if page.name == "README.md":
                    problems.append(f"{b.where()}: README block neither run nor marked")
            elif b.mark[0] == "not run" and len(b.mark[1].split()) < 3:
                problems.append(f"{b.where()}: 'not run' needs a reason, got {b.mark[1]!r}")
            elif b.mark[0] == "run by":
                test = ROOT / b.mark[1]
                if not test.is_file() or page.name not in test.read_text(encoding="utf-8"):
                    problems.append(f"{b.where()}: {b.mark[1]} does not run blocks of "
                                    f"{page.name}")
    assert not problems, "\n".join(problems)


def test_every_environment_has_a_page_and_a_readme_line() -> None:
    """A new environment gets a page of its own (with its paper section) and a README line."""
    from belieflens import envs

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [n for n in envs.names() if not (DOCS / "environments" / f"{n}.md").is_file()]
    assert not missing, f"no docs/environments/NAME.md for {missing} (copy coin-flip.md)"
    rows = re.findall(r"^\| \[`([a-z0-9-]+)`\]\(docs/environments/\1\.md\) \|", readme, re.M)
    assert sorted(rows) == sorted(envs.names()), "README's environments table: one line each"
    pages_ = {p.stem for p in (DOCS / "environments").glob("*.md")} - {"index"}
    assert pages_ == set(envs.names()), f"pages of no environment: {pages_ - set(envs.names())}"


def test_readme_models_table_lists_the_embedded_models() -> None:
    from belieflens.model.load import catalogue

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z0-9.-]+)` \| .* \| (\d+) \| `make [^`]+` \|$", readme, re.M)
    embedded = [m for m in catalogue() if m.kind == "embedded"]
    assert sorted((m.name, str(m.layers)) for m in embedded) == sorted(rows)


def test_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 200


# --- docstrings ----------------------------------------------------------------------------


def public_objects() -> Iterator[tuple[str, object]]:
    """Every public name that must carry a docstring with an example."""
    import belieflens
    from belieflens import envs
    from belieflens.analysis.accessor import BeliefLensAccessor

    for name in belieflens.__all__:
        if not name.startswith("__"):
            yield f"belieflens.{name}", getattr(belieflens, name)
    for name, member in inspect.getmembers(BeliefLensAccessor, inspect.isfunction):
        if not name.startswith("_"):
            yield f"ds.bl.{name}", member
    for name in envs.names():
        cls = envs.environment_class(name)
        yield f"{cls.__module__}.{getattr(cls, '__qualname__', '')} ({name})", cls


def rendered_modules() -> list[ModuleType]:
    """Modules whose own docstring (with its examples) heads an API reference page."""
    import belieflens
    import belieflens.analysis.accessor

    return [belieflens, belieflens.analysis.accessor]


def has_example(doc: str) -> bool:
    return ">>>" in doc or re.search(r"^\s*Examples?:?\s*$", doc, re.M) is not None


def test_public_names_have_docstrings_with_an_example() -> None:
    missing = [name for name, obj in public_objects()
               if not has_example(inspect.getdoc(obj) or "")]
    assert not missing, "no docstring with an example (>>> or an Example section):\n" + \
        "\n".join(missing)


def test_skipped_docstring_examples_say_why() -> None:
    objects = [*public_objects(), *((m.__name__, m) for m in rendered_modules())]
    silent = [name for name, obj in objects
              if "+SKIP" in (doc := inspect.getdoc(obj) or "") and "not run" not in doc.lower()]
    assert not silent, "examples marked +SKIP without saying they are not run: " + \
        ", ".join(silent)


def run_doctests(objects: Sequence[tuple[str, object]], globs: dict[str, object]) -> None:
    """Run the ``>>>`` examples of ``objects``' own docstrings; fail with the report."""
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for name, obj in objects:
        for test in finder.find(obj, name, globs=dict(globs)):
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring examples failed (report above)"


def test_environment_examples_run() -> None:
    """The environment classes' examples: pure, no model."""
    import belieflens

    envs_ = [(n, o) for n, o in public_objects() if n.startswith("belieflens.envs.")
             and inspect.isclass(o)]
    run_doctests(envs_, {"belieflens": belieflens})


# --- what needs the embedded model ----------------------------------------------------------


@pytest.fixture(scope="module")
def docs_study(smol_model: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study of Getting started: ``belieflens extract coin-flip --set turns=4 --episodes 2
    --seed 0 --out study.h5`` on the embedded model."""
    import belieflens

    out = tmp_path_factory.mktemp("docs-study") / "study.h5"
    return belieflens.extract("coin-flip", params={"turns": 4}, episodes=2, seed=0, out=out,
                              model=smol_model)


def _in_folder(study: Path, folder: Path) -> None:
    """``folder`` holds the study as ``study.h5`` (the tests then run there)."""
    shutil.copy(study, folder / "study.h5")


@pytest.mark.real_model
@pytest.mark.slow
def test_api_examples_run(docs_study: Path, smol_model: LoadedModel, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples of the facade and of ``ds.bl``, next to the study of Getting started
    (``study.h5``; ``ds`` is it, opened; ``model`` is the embedded model, loaded once for the
    session rather than once per example)."""
    import belieflens

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    _in_folder(docs_study, tmp_path)
    objects = [(n, o) for n, o in public_objects() if not n.startswith("belieflens.envs.")]
    objects += [(m.__name__, m) for m in rendered_modules()]
    with belieflens.open_cache("study.h5") as ds:
        run_doctests(objects, {"belieflens": belieflens, "ds": ds, "model": smol_model})


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize("page", run_pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_page_blocks_run(page: Path, docs_study: Path, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Every unmarked Python and shell block of ``page``, in order, as a reader would run
    them after Getting started."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    _in_folder(docs_study, tmp_path)
    env = dict(os.environ,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    namespace: dict[str, object] = {}
    run: dict[str, Callable[[Block], None]] = {
        "python": lambda b: exec(compile(b.body, b.where(), "exec"), namespace),
        "bash": lambda b: _shell(b, tmp_path, env),
    }
    for b in blocks(page):
        if b.language in CODE and b.mark is None:
            run["python" if b.language in ("python", "py") else "bash"](b)


def _shell(block: Block, folder: Path, env: dict[str, str]) -> None:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.body], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"{block.where()} failed:\n{done.stderr[-3000:]}"
