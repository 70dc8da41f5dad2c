"""Environments are known by capability outside ``envs/``: no module of the package outside
``belieflens/envs/`` (and ``train/``, whose recipes pick environments as a user's script
would) holds an environment's name as a string in its code. Docstrings are documentation and
may name them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import belieflens
from belieflens import envs
from belieflens.envs.registry import register

PACKAGE = Path(belieflens.__file__).parent
ALLOWED = ("envs", "train")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (module, class, function) or bare
    string statements (attribute docstrings)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                out.add(id(stmt.value))
    return out


@functools.cache
def string_constants(path: Path) -> tuple[tuple[int, str], ...]:
    """(line, value) of each string constant of the module's code, docstrings excluded.

    Parsed once per file and process: the scans for environment, token-process and
    intervention-kind names each walk every module of the package, once per name."""
    tree = ast.parse(path.read_text("utf-8"))
    docs = _docstrings(tree)
    return tuple((node.lineno, node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)
                 and id(node) not in docs)


def names_in_code(path: Path, names: set[str], root: Path = PACKAGE.parent) -> list[str]:
    """``path:line: name`` (``path`` relative to ``root``) for each string constant of the
    module's code that is one of ``names`` (docstrings excluded)."""
    return [f"{path.relative_to(root)}:{line}: {value}"
            for line, value in string_constants(path) if value in names]


def test_no_environment_name_outside_envs() -> None:
    names = set(envs.names())
    assert {"coin-flip", "mess3"} <= names
    found = [hit for p in sorted(PACKAGE.rglob("*.py"))
             if p.relative_to(PACKAGE).parts[0] not in ALLOWED
             for hit in names_in_code(p, names)]
    assert not found, "environment names outside envs/:\n" + "\n".join(found)


def test_the_scan_finds_a_name_in_code_and_not_in_a_docstring(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text('"""coin-flip"""\nx = "coin-flip"\ndef f() -> None:\n    """coin-flip"""\n')
    assert names_in_code(path, {"coin-flip"}, tmp_path) == ["m.py:2: coin-flip"]


def test_every_environment_registers_itself_once() -> None:
    for name in envs.names():
        assert envs.environment_class(name).name == name
    taken = type("Impostor", (), {"name": "coin-flip"})
    with pytest.raises(ValueError, match="taken"):
        register(taken)
    assert getattr(envs.environment_class("coin-flip"), "__name__", "") == "CoinFlip"
