"""No function or method in ``belieflens/`` runs over :data:`LIMIT` lines, and at most
:data:`MOST_LONG` run over :data:`LONG`.

A long function is several ideas under one name; the limit keeps each one short enough to
read at once. Every module is parsed (not imported), and a function's length counts from its
``def`` line (decorators excluded) to its last line, nested functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIMIT = 80
"""The most lines a function of the package may take."""

LONG = 60
"""A function over this many lines is long."""

MOST_LONG = 10
"""The most long functions the package may have."""

PACKAGE = Path(__file__).resolve().parents[1] / "belieflens"


def long_functions(root: Path, limit: int) -> list[tuple[int, str]]:
    """``(lines, "path:line name")`` of every function under ``root`` over ``limit`` lines."""
    rows = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > limit:
                    rows.append((n, f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"))
    return sorted(rows, reverse=True)


def test_no_function_runs_over_the_limit() -> None:
    long = long_functions(PACKAGE, LIMIT)
    assert not long, f"functions over {LIMIT} lines: " + "; ".join(f"{w} ({n})" for n, w in long)


def test_few_functions_are_long() -> None:
    long = long_functions(PACKAGE, LONG)
    assert len(long) <= MOST_LONG, (
        f"{len(long)} functions over {LONG} lines (at most {MOST_LONG}): "
        + "; ".join(f"{w} ({n})" for n, w in long))


def test_the_check_finds_a_long_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (pkg / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(pkg, LIMIT) == [(LIMIT + 1, "pkg/m.py:5 long")]
