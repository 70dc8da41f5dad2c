"""The documentation cannot rot.

1. Every Python and shell block of the hand-written docs (``docs/**/*.md``) and of the README
   is run by a test or marked, on the line before it, as not run with a reason:

   - ``<!-- not run: REASON -->``: not run (REASON says why: a cluster, minutes of work, ...);
   - ``<!-- run by: tests/FILE.py -->``: run by that test (the README's walk-throughs, by
     this module, in this process: the command-line one's study is the study of Getting
     started);
   - no mark (docs pages only): run here, by :func:`test_page_blocks_run`, every block of the
     page in order in one folder holding the study of Getting started (``study.h5``), Python
     blocks in one namespace, shell blocks with ``bash -euo pipefail`` (a block of plain
     ``belieflens`` commands alone: in the test process, with the session's model).

   Every fenced block names its language (``text`` for output), so none escapes the rule.
2. Every public name has a docstring with an example (an ``Example`` section or ``>>>``):
   every name in ``belieflens.__all__``, every ``ds.bl`` method and every environment class.
3. Those docstrings' examples run as doctests, and so do the examples of the module
   docstrings that head API reference pages (``belieflens``, ``belieflens.analysis.accessor``):
   the environment classes' without a model, the others next to the study of Getting started
   on the embedded model. An example that is not run says so (``+SKIP`` and "not run").
4. Numbers are written by their commands, not typed: every results file (``docs/results/NAME.md``
   and ``NAME.json``, written through ``belieflens.results``) names a command that exists (a
   ``bench`` module, a ``make`` target, a ``belieflens`` command or a test file), has a
   complete header, is its JSON's rendering (not edited by hand) and is included by a page;
   every table of numbers on a docs page is an included results file (``--8<--
   "docs/results/NAME.md"``) or is marked, on the line right above it, ``<!-- illustrative:
   REASON -->`` (an example, or a configuration rather than a measurement). A failure names
   the file.
"""

from __future__ import annotations

import doctest
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from belieflens import results

if TYPE_CHECKING:
    from belieflens.model.load import LoadedModel

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GENERATED = {DOCS / "models" / "compare.md"}
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


# --- results files --------------------------------------------------------------------------

RESULTS = DOCS / "results"
ILLUSTRATIVE = re.compile(r"^<!-- illustrative: (?P<why>\S.*?) -->$")
SNIPPET = re.compile(r'^--8<-- "(?P<path>docs/results/[^"]+)"$', re.M)
NUMBER = re.compile(r"\d\.\d|\d ?%")
"""A table cell holding a measured-looking number: a decimal or a percentage."""


def make_targets(makefile: Path = ROOT / "Makefile") -> set[str]:
    """The Makefile's targets (a pattern rule ``model-%`` as itself)."""
    text = makefile.read_text(encoding="utf-8")
    return {m[1] for m in re.finditer(r"^([A-Za-z0-9_%.-]+):(?!=)", text, re.M)}


def cli_commands() -> set[str]:
    """The ``belieflens`` commands (``lens``, ``intervene`` and the others)."""
    import typer.main

    from belieflens.cli.main import app

    group = typer.main.get_command(app)
    return set(getattr(group, "commands", {}))


def command_problem(command: str, *, targets: set[str], commands: set[str],
                    root: Path = ROOT) -> str | None:
    """Why ``command`` (a results header's) names nothing that exists, or ``None``.

    Each segment (split at ``;``, ``&&``, ``|``) is checked: after environment assignments,
    ``nice``/``time`` and a ``.venv/bin/`` prefix, it must be ``python -m bench.NAME`` with
    ``bench/NAME.py`` present, ``make TARGET`` with a Makefile target, ``belieflens COMMAND``
    with a CLI command, or ``pytest tests/FILE.py`` with the file present.
    """
    for segment in re.split(r";|&&|\|", command):
        try:
            words = shlex.split(segment)
        except ValueError as e:
            return f"command does not parse ({e})"
        while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0])
                         or words[0] in ("nice", "time", "/usr/bin/time", "-v")
                         or re.fullmatch(r"-n|-?\d+", words[0])):
            words = words[1:]
        if not words:
            continue
        head = words[0].removeprefix(".venv/bin/")
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if head in ("python", "python3") and words[1:2] == ["-m"] and len(words) > 2:
            module = words[2]
            if not module.startswith("bench.") or \
                    not (root / "bench" / f"{module.removeprefix('bench.')}.py").is_file():
                return f"names no bench module: {module}"
        elif head == "make":
            target = rest[0] if rest else ""
            if target not in targets and not any(
                    t.endswith("%") and target.startswith(t[:-1]) for t in targets):
                return f"names no make target: {target or '(none)'}"
        elif head == "belieflens":
            if not rest or rest[0] not in commands:
                return f"names no belieflens command: {rest[0] if rest else '(none)'}"
        elif head == "pytest":
            if not rest or not (root / rest[0].split("::")[0]).is_file():
                return f"names no test file: {rest[0] if rest else '(none)'}"
        else:
            return f"names no bench module, make target, belieflens command or test: {head}"
    return None


def results_problems(md: Path, *, targets: set[str], commands: set[str],
                     root: Path = ROOT) -> list[str]:
    """What is wrong with the results file ``md`` (each problem names the file)."""
    where = str(md.relative_to(root)) if md.is_relative_to(root) else str(md)
    beside = md.with_suffix(".json")
    if not beside.is_file():
        return [f"{where}: no {beside.name} beside it (write it with belieflens.results)"]
    try:
        found = results.load(beside)
    except ValueError as e:
        return [f"{where}: {e}"]
    problems = []
    missing = found.header.missing()
    if missing:
        problems.append(f"{where}: header incomplete, no {', '.join(missing)}")
    why = command_problem(found.header.command, targets=targets, commands=commands, root=root)
    if why:
        problems.append(f"{where}: {why}")
    if md.read_text(encoding="utf-8") != found.markdown():
        problems.append(f"{where}: differs from its JSON's rendering (edited by hand? rerun "
                        "its command)")
    return problems


def test_results_files_name_a_command_and_are_complete() -> None:
    targets, commands = make_targets(), cli_commands()
    files = sorted(RESULTS.glob("*.md"))
    assert files, "no results files under docs/results/"
    problems = [p for md in files for p in results_problems(md, targets=targets,
                                                            commands=commands)]
    strays = sorted(j.name for j in RESULTS.glob("*.json") if not j.with_suffix(".md").exists())
    problems += [f"docs/results/{name}: no Markdown beside it" for name in strays]
    assert not problems, "\n".join(problems)


def test_a_bad_results_file_is_named(tmp_path: Path) -> None:
    """Bad input: a command that no longer exists, and a header with a field left empty."""
    (tmp_path / "bench").mkdir()
    rec = results.start("python -m bench.gone --fast", threads=1, folder=tmp_path)
    gone = rec.write("gone", ["a"], [["1.0"]])
    ok = results.start("make demo", threads=1, folder=tmp_path).write("ok", ["a"], [["1.0"]])
    assert results_problems(ok, targets={"demo"}, commands=set(), root=tmp_path) == []
    assert results_problems(gone, targets={"demo"}, commands=set(), root=tmp_path) == [
        "gone.md: names no bench module: bench.gone"]
    raw = json.loads(ok.with_suffix(".json").read_text("utf-8"))
    raw["header"]["wall"] = ""
    ok.with_suffix(".json").write_text(json.dumps(raw), "utf-8")
    assert results_problems(ok, targets={"demo"}, commands=set(), root=tmp_path) == [
        "ok.md: header incomplete, no wall",
        "ok.md: differs from its JSON's rendering (edited by hand? rerun its command)"]
    for command, why in [("make nothing", "names no make target: nothing"),
                         ("belieflens frobnicate x", "names no belieflens command: frobnicate"),
                         ("rm -rf /", "names no bench module, make target, belieflens "
                          "command or test: rm")]:
        assert command_problem(command, targets={"demo"}, commands={"extract"},
                               root=tmp_path) == why
    assert command_problem("OMP_NUM_THREADS=1 nice -n 10 .venv/bin/belieflens extract x",
                           targets=set(), commands={"extract"}, root=tmp_path) is None


README_NUMBER = re.compile(r"(?<![\w.§-])\d+\.\d+(?![\w.])")
"""A decimal in the README's prose that is not part of a name (``Qwen2.5``, ``0.5B``) or a
section (``§4.1``)."""


def test_readme_numbers_come_from_results_files() -> None:
    """The README cannot include files, so each decimal number in its prose must be one a
    results file holds: a number there that its command no longer writes fails here."""
    readme = FENCE.sub("", (ROOT / "README.md").read_text(encoding="utf-8"))
    written = "\n".join(md.read_text(encoding="utf-8") for md in RESULTS.glob("*.md"))
    stray = sorted({n for n in README_NUMBER.findall(readme)
                    if not re.search(rf"(?<![\d.]){re.escape(n)}(?!\d)", written)})
    assert not stray, f"README numbers in no docs/results file: {stray}"


def number_tables(page: Path) -> list[tuple[int, bool]]:
    """(line, marked illustrative) of each table on ``page`` holding a number
    (:data:`NUMBER`) in its body."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.match(r"^\|[-:| ]+\|$", lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            if any(NUMBER.search(row) for row in lines[i + 2:j]):
                out.append((i + 1, i > 0 and ILLUSTRATIVE.match(lines[i - 1]) is not None))
            i = j
        else:
            i += 1
    return out


def test_number_tables_are_results_files_or_illustrative() -> None:
    pages_ = [p for p in pages() if RESULTS not in p.parents]
    typed = [f"{p.relative_to(ROOT)}:{line}" for p in pages_
             for line, marked in number_tables(p) if not marked]
    assert not typed, ("tables of numbers typed into a page (write them with "
                       "belieflens.results and include docs/results/NAME.md, or mark "
                       "<!-- illustrative: REASON --> right above):\n" + "\n".join(typed))


def test_every_results_file_is_included_by_a_page() -> None:
    included = {m["path"] for p in pages() for m in SNIPPET.finditer(p.read_text("utf-8"))}
    missing = [p for p in included if not (ROOT / p).is_file()]
    assert not missing, f"pages include results files that do not exist: {missing}"
    orphans = sorted(str(md.relative_to(ROOT)) for md in RESULTS.glob("*.md")
                     if str(md.relative_to(ROOT)) not in included)
    assert not orphans, f"results files no page includes: {orphans}"


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


README = ROOT / "README.md"
README_MARK = ("run by", "tests/test_docs.py")
"""The README's walk-throughs carry this mark; they run here."""


def readme_block(language: str) -> Block:
    """The one ``language`` block that the README marks as run by this module."""
    found = [b for b in blocks(README) if b.language == language and b.mark == README_MARK]
    assert len(found) == 1, f"README marks {len(found)} {language} blocks for this module"
    return found[0]


@dataclass(frozen=True)
class Walkthrough:
    """The README's command-line walk-through, run: its folder and what it printed."""

    folder: Path
    stdout: str


@pytest.fixture(scope="module")
def getting_started(smol_model: LoadedModel,
                    tmp_path_factory: pytest.TempPathFactory) -> Walkthrough:
    """Every command of the README's command-line walk-through, in order, in a new folder (in
    this process, with the session's model: :func:`belieflens_lines`). Its ``study.h5``
    (``belieflens extract coin-flip --set turns=4 --episodes 2 --seed 0 --out study.h5``) is
    the study of Getting started that the docs' blocks and examples run next to."""
    block = readme_block("bash")
    commands = belieflens_lines(block.body)
    assert commands, f"{block.where()}: the walk-through is no longer plain belieflens commands"
    folder = tmp_path_factory.mktemp("getting-started")
    with pytest.MonkeyPatch.context() as mp:
        _as_reader(folder, smol_model, mp)
        stdout = _cli(block, commands)
    return Walkthrough(folder, stdout)


@pytest.fixture(scope="module")
def docs_study(getting_started: Walkthrough) -> Path:
    """The study of Getting started (the README walk-through's ``study.h5``)."""
    return getting_started.folder / "study.h5"


@pytest.mark.real_model
def test_readme_cli_walkthrough_runs(getting_started: Walkthrough) -> None:
    """Every command of the README's command-line walk-through succeeds and does what the
    README says of it."""
    folder, out = getting_started.folder, getting_started.stdout
    assert (folder / "study.h5").is_file()
    assert (folder / "report" / "report.md").is_file()
    for figure in ("trajectory.png", "lens_tvd.png"):
        assert (folder / "report" / figure).stat().st_size > 1000
    assert "next-flip" in out and "TVD" in out  # analyze's tables
    assert "weights_hash" in out  # `belieflens info`: provenance
    assert "coin-flip" in out  # `belieflens envs` and `info` name it
    assert "ok: study.h5 passed every consistency check" in out
    assert "belieflens extract coin-flip" in out.strip().splitlines()[-1]


@pytest.mark.real_model
def test_readme_python_walkthrough_runs(smol_model: LoadedModel, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python walk-through runs as written (the session's model stands in for
    the one its ``extract`` would load) and gives what its comments say."""
    import xarray as xr

    _as_reader(tmp_path, smol_model, monkeypatch)
    block = readme_block("python")
    namespace: dict[str, object] = {}
    exec(compile(block.body, block.where(), "exec"), namespace)
    assert (tmp_path / "study.h5").is_file()
    assert (tmp_path / "tvd_per_layer.png").stat().st_size > 1000
    beliefs, tvd = namespace["beliefs"], namespace["tvd"]
    assert isinstance(beliefs, xr.DataArray) and isinstance(tvd, xr.DataArray)
    assert beliefs.dims == ("delivery", "probe", "episode", "turn", "outcome")
    assert tvd.dims == ("delivery", "probe", "episode", "turn", "layer")
    assert tvd.sizes["turn"] == 5 and tvd.sizes["layer"] == 31
    assert float(tvd.min()) >= 0.0 and float(tvd.max()) <= 1.0
    assert os.path.basename(str(namespace["path"])) == "study.h5"


def _as_reader(folder: Path, model: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in ``folder`` as a reader would, figures to files (Agg), and with ``model``, the
    session's, wherever the docs' code loads it (:func:`_reuse_loaded`)."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(folder)
    _reuse_loaded(model, monkeypatch)


def _in_folder(study: Path, folder: Path) -> None:
    """``folder`` holds the study as ``study.h5`` (the tests then run there)."""
    shutil.copy(study, folder / "study.h5")


@pytest.mark.real_model
@pytest.mark.slow
def test_api_examples_run(docs_study: Path, smol_model: LoadedModel, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples of the facade and of ``ds.bl``, next to the study of Getting started
    (``study.h5``; ``ds`` is it, opened; ``model`` is the embedded model, loaded once for the
    session rather than once per example, and given to the examples that load it)."""
    import belieflens

    _as_reader(tmp_path, smol_model, monkeypatch)
    _in_folder(docs_study, tmp_path)
    objects = [(n, o) for n, o in public_objects() if not n.startswith("belieflens.envs.")]
    objects += [(m.__name__, m) for m in rendered_modules()]
    with belieflens.open_cache("study.h5") as ds:
        run_doctests(objects, {"belieflens": belieflens, "ds": ds, "model": smol_model})


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize("page", run_pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_page_blocks_run(page: Path, docs_study: Path, smol_model: LoadedModel,
                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every unmarked Python and shell block of ``page``, in order, as a reader would run
    them after Getting started. A shell block of ``belieflens`` commands alone runs them in
    this process (:func:`belieflens_lines`), the embedded model loaded once for the session
    rather than once per command; any other shell block runs in ``bash``."""
    _as_reader(tmp_path, smol_model, monkeypatch)
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


SHELL_SYNTAX = re.compile(r"[|&;<>$`(){}*?~]")
"""Characters that make a shell line more than one command with its arguments."""


def belieflens_lines(body: str) -> list[list[str]] | None:
    """The argument lists of ``body``'s commands where each is ``belieflens`` with plain
    arguments (no pipes, redirections, variables or globs); else ``None``."""
    lines = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] != "belieflens" or any(SHELL_SYNTAX.search(w) for w in words):
            return None
        lines.append(words[1:])
    return lines or None


def test_belieflens_lines_take_plain_commands_only() -> None:
    body = ("belieflens intervene steer study.h5 --out s.h5 \\\n    --alphas=-2,0,2  # a comment\n"
            "\nbelieflens analyze s.h5 --out 'my report/'\n")
    assert belieflens_lines(body) == [
        ["intervene", "steer", "study.h5", "--out", "s.h5", "--alphas=-2,0,2"],
        ["analyze", "s.h5", "--out", "my report/"]]
    for other in ("belieflens info study.h5 | head", "belieflens info $STUDY",
                  "python -m bench.x", "belieflens info a.h5 > out.txt", "# nothing\n"):
        assert belieflens_lines(other) is None, other


def _reuse_loaded(model: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Extraction and interventions asking for ``model`` as loaded (its spec, trained, its
    kernels, on the CPU in float32) get it instead of loading it again."""
    from belieflens.interventions import model as chooser
    from belieflens.model import load as loader

    load = loader.load

    def cached(spec: str = loader.DEFAULT_MODEL, **kw: object) -> LoadedModel:
        init = kw.get("init")
        same = (spec == model.info.spec
                and (init is None or init == "trained" or getattr(init, "trained", False))
                and kw.get("kernels", "auto") in ("auto", model.info.kernels)
                and kw.get("device", "cpu") == "cpu" and kw.get("dtype", "float32") == "float32")
        return model if same else load(spec, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(chooser, "load", cached)
    monkeypatch.setattr(loader, "load", cached)


def _cli(block: Block, commands: list[list[str]]) -> str:
    """Run ``commands`` in this process, in order; what they printed (stdout)."""
    import torch
    from typer.testing import CliRunner

    from belieflens.cli.main import app

    printed = []
    for words in commands:
        threads = torch.get_num_threads()
        try:
            r = CliRunner().invoke(app, words)
        finally:
            torch.set_num_threads(threads)
        assert r.exit_code == 0, f"{block.where()}: belieflens {shlex.join(words)} failed:\n" \
            f"{r.output[-3000:]}"
        printed.append(r.stdout)
    return "".join(printed)


def _shell(block: Block, folder: Path, env: dict[str, str]) -> None:
    commands = belieflens_lines(block.body)
    if commands:
        _cli(block, commands)
        return
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.body], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"{block.where()} failed:\n{done.stderr[-3000:]}"
