"""The package's import graph is a DAG that follows the declared layer order.

Every module under ``belieflens/`` is parsed (not imported); every ``import`` counts,
including those inside functions and ``if TYPE_CHECKING:`` blocks. Relative imports are
resolved, and ``from belieflens import envs`` is an import of ``belieflens.envs``. The test
fails on

1. a cycle between modules (a strongly connected component of more than one module),
2. a cycle between top-level subpackages,
3. an import against :data:`LAYERS` (a name may import only names of lower layers, or
   itself); a subpackage never imports the root package ``belieflens``, whose
   ``__init__`` imports the whole API;
4. an import by ``cli/`` of anything of the package but the facade (``belieflens``,
   ``belieflens.api``), ``belieflens.errors`` and ``belieflens.types``
   (:data:`CLI_MAY_IMPORT`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = "belieflens"
"""The root package; its ``__init__`` and the top-level modules not named in :data:`LAYERS`
(``api.py``, ...) form the top-level API layer."""

LAYERS: list[tuple[str, ...]] = [
    ("dims", "errors", "types", "heap", "results"),
    ("episodes",),
    ("readouts",),
    ("lens",),
    ("model",),
    ("store",),
    ("run",),
    ("analysis",),
    ("report",),
    ("interventions",),
    ("envs",),
    ("train",),
    (ROOT,),
    ("cli",),
]
"""Top-level names from the bottom up: a name may be imported by any name of a higher layer.
Names of one layer may not import each other. Names not (yet) in the package are fine."""

LEVEL: dict[str, int] = {name: i for i, layer in enumerate(LAYERS) for name in layer}


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``src`` imports ``dst`` at ``file:line``."""

    src: str
    dst: str
    file: Path
    line: int

    def where(self) -> str:
        """``file:line: src imports dst``."""
        return f"{self.file}:{self.line}: {self.src} imports {self.dst}"


def modules(package_dir: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is_package) for every ``.py`` file under ``package_dir``."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def _resolve(name: str, known: Mapping[str, object]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    """A module's syntax tree, parsed once per text and process (the checks of this file walk
    the package three times; no walk changes a tree)."""
    return ast.parse(text, filename)


def imports(package_dir: Path, package: str) -> list[Import]:
    """Every import of a module of ``package`` by a module of ``package``."""
    mods = modules(package_dir, package)
    edges: list[Import] = []
    for src, (path, is_pkg) in mods.items():
        here = src if is_pkg else src.rpartition(".")[0]
        for node in ast.walk(_parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            line = 0
            if isinstance(node, ast.Import):
                targets, line = [a.name for a in node.names], node.lineno
            elif isinstance(node, ast.ImportFrom):
                line = node.lineno
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    mod = node.module or ""
                # ``from pkg import sub`` imports the module ``pkg.sub`` when it is one.
                targets = [
                    f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names
                ]
            for t in targets:
                if t != package and not t.startswith(package + "."):
                    continue
                dst = _resolve(t, mods)
                if dst is not None and dst != src:
                    edges.append(Import(src, dst, path, line))
    return edges


def unit(module: str, package: str, top_level_modules: Iterable[str] = ()) -> str:
    """The top-level name a module belongs to: ``belieflens.episodes.base`` -> ``envs``.

    The root package and top-level modules not named in :data:`LAYERS` (e.g. ``api``)
    belong to the root's layer, named ``ROOT``.
    """
    parts = module.split(".")
    if len(parts) == 1:
        return ROOT
    name = parts[1]
    if name not in LEVEL and name in top_level_modules:
        return ROOT
    return name


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


@dataclass(frozen=True)
class Report:
    """What is wrong with a package's import graph (all empty when nothing is)."""

    module_cycles: list[str]
    unit_cycles: list[str]
    layer_violations: list[str]
    undeclared: list[str]


def check(package_dir: Path, package: str) -> Report:
    """Build the module and top-level-name graphs of ``package`` and check them."""
    mods = modules(package_dir, package)
    edges = imports(package_dir, package)
    top_modules = {
        m.split(".")[1] for m, (_, is_pkg) in mods.items() if m.count(".") == 1 and not is_pkg
    }
    graph: dict[str, set[str]] = {m: set() for m in mods}
    units: dict[str, set[str]] = {}
    first: dict[tuple[str, str], Import] = {}
    for e in edges:
        graph[e.src].add(e.dst)
        a, b = unit(e.src, package, top_modules), unit(e.dst, package, top_modules)
        units.setdefault(a, set())
        units.setdefault(b, set())
        if a != b:
            units[a].add(b)
            first.setdefault((a, b), e)

    module_cycles = []
    for comp in cycles(graph):
        inner = [e.where() for e in edges if e.src in comp and e.dst in comp]
        module_cycles.append(" <-> ".join(comp) + "\n    " + "\n    ".join(sorted(set(inner))))
    unit_cycles = []
    for comp in cycles(units):
        inner = [first[(a, b)].where() for (a, b) in sorted(first) if a in comp and b in comp]
        unit_cycles.append(" <-> ".join(comp) + "\n    e.g. " + "\n    e.g. ".join(inner))

    undeclared = sorted(
        f"{package}.{u}: declare it in LAYERS" for u in units if u not in LEVEL
    )
    violations = []
    for e in edges:
        a, b = unit(e.src, package, top_modules), unit(e.dst, package, top_modules)
        if a == b or a not in LEVEL or b not in LEVEL:
            continue
        if LEVEL[b] >= LEVEL[a]:
            below = [n for layer in LAYERS[: LEVEL[a]] for n in layer]
            allowed = ", ".join(below) if below else "nothing of the package"
            violations.append(f"{e.where()}  ({a} may import only: {allowed})")
    return Report(module_cycles, unit_cycles, sorted(set(violations)), undeclared)


PACKAGE_DIR = Path(__file__).resolve().parents[1] / ROOT


@pytest.fixture(scope="module")
def report() -> Report:
    return check(PACKAGE_DIR, ROOT)


def test_no_module_cycles(report: Report) -> None:
    assert not report.module_cycles, "import cycles between modules:\n" + "\n".join(
        report.module_cycles
    )


def test_no_subpackage_cycles(report: Report) -> None:
    assert not report.unit_cycles, "import cycles between subpackages:\n" + "\n".join(
        report.unit_cycles
    )


def test_imports_follow_the_layer_order(report: Report) -> None:
    assert not report.layer_violations, "imports against the layer order:\n" + "\n".join(
        report.layer_violations
    )


def test_every_subpackage_has_a_layer(report: Report) -> None:
    assert not report.undeclared, "\n".join(report.undeclared)


def test_the_walk_sees_the_package() -> None:
    edges = imports(PACKAGE_DIR, ROOT)
    pairs = {(e.src, e.dst) for e in edges}
    assert ("belieflens.readouts.render", "belieflens.episodes.base") in pairs
    assert len({e.src for e in edges}) > 50


# ----------------------------------------------------------------------------- the checker


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_checker_finds_a_synthetic_cycle_and_an_upward_import(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/types.py": "",
            "pkg/episodes/__init__.py": "from pkg.episodes.a import A\n",
            # an upward import hidden in a function, under TYPE_CHECKING
            "pkg/episodes/a.py": (
                "from typing import TYPE_CHECKING\n"
                "def f() -> None:\n"
                "    if TYPE_CHECKING:\n"
                "        from pkg.run import b\n"
                "A = 1\n"
            ),
            "pkg/run/__init__.py": "",
            # relative import two levels up, resolved to pkg.episodes.a
            "pkg/run/b.py": "from ..episodes import a\nfrom . import c\n",
            "pkg/run/c.py": "from pkg import types\n",
        },
    )
    r = check(pkg, "pkg")
    assert len(r.module_cycles) == 1
    assert r.module_cycles[0].startswith("pkg.episodes.a <-> pkg.run.b")
    assert len(r.unit_cycles) == 1 and r.unit_cycles[0].startswith("episodes <-> run")
    assert len(r.layer_violations) == 1
    assert "pkg.episodes.a imports pkg.run.b" in r.layer_violations[0]
    assert "episodes may import only: dims, errors, types, heap" in r.layer_violations[0]
    assert not r.undeclared
    pairs = {(e.src, e.dst) for e in imports(pkg, "pkg")}
    assert ("pkg.run.c", "pkg.types") in pairs  # ``from pkg import types`` is the module
    assert ("pkg.run.b", "pkg.run.c") in pairs


def test_checker_refuses_the_root_below_the_api_and_unknown_subpackages(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.api import run\n",
            "pkg/api.py": "from pkg.analysis import x\nrun = 1\n",
            "pkg/analysis/__init__.py": "",
            "pkg/analysis/x.py": "import pkg\n",
            "pkg/misc/__init__.py": "from pkg.envs import y\n",
            "pkg/envs/__init__.py": "",
            "pkg/envs/y.py": "",
        },
    )
    r = check(pkg, "pkg")
    assert any("pkg.analysis.x imports pkg " in v for v in r.layer_violations)
    assert r.undeclared == ["pkg.misc: declare it in LAYERS"]
    # the api module is the root's layer: importing analysis from it is fine
    assert not any(v.startswith(f"{pkg / 'api.py'}") for v in r.layer_violations)


# ----------------------------------------------------------------------------- the CLI


CLI_MAY_IMPORT: tuple[str, ...] = (ROOT, f"{ROOT}.api", f"{ROOT}.errors", f"{ROOT}.types")
"""What of the package ``cli/`` may import besides itself: the facade (the root package and
:mod:`belieflens.api`), the error types and the option sets."""


def cli_imports(package_dir: Path, package: str) -> list[str]:
    """``file:line: module`` for each import of the package by ``cli/`` that is not of
    :data:`CLI_MAY_IMPORT` (with ``package`` for ``belieflens``) or of ``cli`` itself."""
    allowed = {name.replace(ROOT, package, 1) for name in CLI_MAY_IMPORT}
    cli = f"{package}.cli"
    bad = []
    for e in imports(package_dir, package):
        if e.src.startswith(cli) and e.dst not in allowed and not e.dst.startswith(cli):
            bad.append(f"{e.file}:{e.line}: {e.dst}")
    return sorted(set(bad))


def test_the_cli_imports_only_the_facade() -> None:
    bad = cli_imports(PACKAGE_DIR, ROOT)
    assert not bad, "cli/ imports past the facade (belieflens, belieflens.api, errors, " \
        "types):\n" + "\n".join(bad)


def test_the_cli_rule_sees_a_synthetic_import_past_the_facade(tmp_path: Path) -> None:
    empty = ("__init__", "errors", "types", "store/__init__", "store/x", "cli/__init__")
    files = {f"pkg/{name}.py": "" for name in empty}
    files["pkg/api.py"] = "from pkg.store import x\n"
    files["pkg/cli/options.py"] = "from pkg.errors import E\n"
    files["pkg/cli/main.py"] = (
        "import pkg\nfrom pkg import api, errors\nfrom pkg.types import T\nfrom . import options\n"
        "def f() -> None:\n    from pkg.store.x import y\n"
    )
    pkg = _write(tmp_path, files)
    bad = cli_imports(pkg, "pkg")
    assert len(bad) == 1 and bad[0].endswith("main.py:6: pkg.store.x")
