"""Every cross-reference in the package's docstrings names something that exists.

The docstrings cite with Sphinx roles (``:func:`load```, ``:class:`~.head.Head```,
``:mod:`belieflens.run.resume```) and Markdown autorefs (``[belieflens.extract][]``,
``[the facade][belieflens.api]``). The documentation site renders a role whose target it
cannot find as plain code, without a warning (``docs/griffe_roles.py``), so a reference to a
renamed or removed name would go unnoticed: this test resolves each one by importing it.

A target resolves as Sphinx would look it up from where the docstring stands: a leading
``.`` is relative to the docstring's package (``..`` one up); a plain name is looked up in
the enclosing class, then the module's own namespace (its definitions and imports), then as
an absolute dotted path (any importable module, e.g. ``xarray.apply_ufunc``), then as a
builtin (``ValueError``). An attribute may also be a field or annotated attribute of its
class (dataclass fields, Protocol members) or one its methods set on ``self``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "belieflens"

ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|data|attr|obj|exc|const):`(?P<target>[^`<]+)`")
"""A Sphinx role; its target is the text between the backquotes (``~`` shortens the shown
name, ``()`` may follow a function)."""

AUTOREF = re.compile(r"\[(?P<text>[^\]\n]+)\]\[(?P<target>[^\]\n]*)\]")
"""A Markdown autoref: ``[target][]`` or ``[text][target]``."""


@dataclass(frozen=True)
class Reference:
    """One cross-reference: its target as written and where it stands."""

    target: str
    module: str
    scope: tuple[str, ...]
    """The names of the classes (and functions) enclosing the docstring, outermost first."""
    line: int

    def where(self) -> str:
        """``module:line: target``."""
        return f"{self.module.replace('.', '/')}.py:{self.line}: {self.target}"


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` under :data:`PACKAGE`."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


Docstring = tuple[str, tuple[str, ...], int]
"""A docstring's text, the names of the scopes enclosing it and its first line."""


def _docstrings(tree: ast.Module) -> Iterator[Docstring]:
    """Every docstring of a module: of the module, classes, functions, and the attribute
    docstrings (a string right after an assignment), with its enclosing scope and line."""

    def walk(body: list[ast.stmt], scope: tuple[str, ...]) -> Iterator[Docstring]:
        for stmt in body:
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)):
                yield stmt.value.value, scope, stmt.lineno
            elif isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(stmt.body, (*scope, stmt.name))
            elif isinstance(stmt, ast.If | ast.Try | ast.With):
                yield from walk(stmt.body, scope)

    yield from walk(tree.body, ())


def references() -> list[Reference]:
    """Every role and autoref target in every docstring of the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        for text, scope, line in _docstrings(ast.parse(path.read_text(), str(path))):
            for pattern in (ROLE, AUTOREF):
                for m in pattern.finditer(text):
                    target = m["target"] or m.groupdict().get("text") or ""
                    if pattern is AUTOREF and not _looks_like_a_name(target):
                        continue
                    at = line + text.count("\n", 0, m.start())
                    out.append(Reference(target, name, scope, at))
    return out


def _looks_like_a_name(text: str) -> bool:
    """Whether an autoref's target is a dotted Python name (Markdown links of other kinds,
    e.g. ``[i][j]`` indexing in a formula, are not references)."""
    return re.fullmatch(r"`?[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+`?", text) is not None


def _import(dotted: str) -> Any:
    """The object at an absolute dotted path: the longest importable module prefix, then
    attributes (or class fields and annotations) for the rest; ``KeyError`` if none."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        return _attributes(obj, parts[i:])
    raise KeyError(dotted)


def _attributes(obj: Any, names: list[str]) -> Any:
    """``obj.a.b...`` for ``names`` ``[a, b, ...]``; ``KeyError`` if one does not exist."""
    for name in names:
        if hasattr(obj, name):
            obj = getattr(obj, name)
        elif isinstance(obj, type) and _declares(obj, name):
            obj = None  # a field or an instance attribute: no object, but it exists
        else:
            raise KeyError(name)
    return obj


def _declares(cls: type, name: str) -> bool:
    """Whether ``cls`` (or a base) annotates ``name`` or sets ``self.name`` in a method."""
    for c in cls.__mro__:
        if name in getattr(c, "__annotations__", {}):
            return True
        try:
            source = inspect.getsource(c)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{re.escape(name)}\b[^=\n]*=(?!=)", source):
            return True
    return False


def resolve(ref: Reference) -> bool:
    """Whether ``ref``'s target exists, looked up as the module docstring says."""
    target = ref.target.strip().lstrip("~").removesuffix("()")
    module = importlib.import_module(ref.module)
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        is_package = hasattr(module, "__path__")
        base = ref.module.split(".")
        base = base[: len(base) - (dots - 1) - (0 if is_package else 1)]
        candidates = [".".join([*base, target.lstrip(".")])]
    else:
        candidates = []
        for i in range(len(ref.scope), 0, -1):
            candidates.append(".".join([ref.module, *ref.scope[:i], target]))
        candidates += [f"{ref.module}.{target}", target, f"builtins.{target}"]
    for dotted in candidates:
        try:
            _import(dotted)
            return True
        except KeyError:
            pass
        if dotted == f"{ref.module}.{target}":
            try:
                _attributes(module, target.split("."))
                return True
            except KeyError:
                pass
    return False


def test_every_docstring_reference_resolves() -> None:
    refs = references()
    assert len(refs) > 500  # the walk finds the package's references
    broken = [r.where() for r in refs if not resolve(r)]
    assert not broken, "docstrings cite names that do not exist:\n" + "\n".join(broken)


@pytest.mark.parametrize(("target", "module", "scope", "ok"), [
    ("belieflens.extract", "belieflens.api", (), True),
    ("~belieflens.lens.TunedLens", "belieflens.api", (), True),
    (".head.Head", "belieflens.lens", (), True),
    (".head.Head", "belieflens.lens.base", (), True),
    ("load", "belieflens.api", (), True),
    ("Study.to_json", "belieflens.store.fingerprint", (), True),
    ("sizes", "belieflens.store.fingerprint", ("Study",), True),
    ("xarray.apply_ufunc", "belieflens.api", (), True),
    ("ValueError", "belieflens.dims", (), True),
    ("Stop.mode", "belieflens.run.signals", (), True),
    ("Stop.nothing", "belieflens.run.signals", (), False),
    ("belieflens.readouts.debias", "belieflens.api", (), False),
    ("no_such_name", "belieflens.api", (), False),
    (".no_such_module", "belieflens.lens", (), False),
])
def test_resolution_finds_what_exists_and_only_that(target: str, module: str,
                                                    scope: tuple[str, ...], ok: bool) -> None:
    assert resolve(Reference(target, module, scope, 1)) is ok


def test_modules_import() -> None:
    """Every module the references are looked up from imports (a module that does not would
    fail every reference in it)."""
    mods = {module_name(p) for p in PACKAGE.rglob("*.py")}
    assert all(isinstance(importlib.import_module(m), ModuleType) for m in sorted(mods))
