"""The walk of ``belieflens extract`` from the CLI to the file: which modules of the package a
run visits and how often a call crosses from one top-level package (cli, api, run, store, ...)
into another.

Every Python call into a module of belieflens is recorded (calls made while importing apart),
with its caller the nearest belieflens frame below it. A *jump* is a distinct (caller file,
callee file) pair whose files sit in different top-level packages. With ``--base REV`` the
same command is walked on that git revision too (a temporary worktree), as the baseline.

Run: ``.venv/bin/python -m bench.walk [--base REV] [--files] -- extract coin-flip --set
turns=2 --episodes 2 --out /tmp/walk.h5 --overwrite --quiet``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _package(rel: str) -> str:
    """The top-level package (or module) of a path relative to ``belieflens/``."""
    head = rel.split(os.sep)[0]
    return head.removesuffix(".py")


def walk(args: Sequence[str]) -> dict[str, Any]:
    """Run the CLI with ``args`` in this process under a tracer: the files visited in order
    and the jumps between packages."""
    import belieflens
    from belieflens.cli.main import app

    pkg_root = str(Path(belieflens.__file__).parent) + os.sep
    visited: list[str] = []
    jumps: list[tuple[str, str]] = []

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        f = frame.f_code.co_filename
        if not f.startswith(pkg_root) or frame.f_code.co_name == "<module>":
            return
        back = frame.f_back
        while back is not None:
            bf = back.f_code.co_filename
            if back.f_code.co_name == "<module>" and (bf.startswith(pkg_root)
                                                      or "importlib" in bf):
                return  # a call made while importing
            if bf.startswith(pkg_root):
                break
            back = back.f_back
        rel = f[len(pkg_root):]
        if rel not in visited:
            visited.append(rel)
        if back is not None:
            brel = back.f_code.co_filename[len(pkg_root):]
            if _package(brel) != _package(rel) and (brel, rel) not in jumps:
                jumps.append((brel, rel))

    sys.settrace(tracer)
    try:
        app(list(args), standalone_mode=False)
    finally:
        sys.settrace(None)
    return {"files": visited, "jumps": jumps}


def _summary(w: dict[str, Any]) -> dict[str, int]:
    edges = {(_package(a), _package(b)) for a, b in w["jumps"]}
    return {"files": len(w["files"]), "jumps": len(w["jumps"]), "edges": len(edges),
            "packages": len({p for e in edges for p in e})}


def _print(label: str, w: dict[str, Any], files: bool) -> None:
    s = _summary(w)
    print(f"{label}: {s['files']} files visited, {s['jumps']} jumps between packages "
          f"(distinct file->file calls), {s['edges']} package->package edges, "
          f"{s['packages']} packages")
    if files:
        print("  " + " -> ".join(f.removesuffix(".py") for f in w["files"]))
    pairs = Counter(tuple(sorted((_package(a), _package(b)))) for a, b in w["jumps"])
    print("  jumps by package pair: " + ", ".join(f"{a}-{b} {n}" for (a, b), n
                                                   in pairs.most_common()))


def _walk_at(rev: str, args: Sequence[str]) -> dict[str, Any]:
    """The walk of ``args`` on git revision ``rev`` (a temporary worktree, run with this
    interpreter and this tracer, copied into it)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                        str(tree), rev], check=True)
        try:
            out = Path(tmp) / "walk.json"
            env = {**os.environ, "PYTHONPATH": str(tree)}
            shutil.copy(Path(__file__), tree / "bench" / "walk.py")  # the same tracer there
            subprocess.run([sys.executable, "-m", "bench.walk", "--json", str(out), "--", *args],
                           cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
            result: dict[str, Any] = json.loads(out.read_text())
            return result
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(tree)], check=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the walk of a ``belieflens`` command, and of the same on ``--base``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default=None, help="a git revision to walk as the baseline")
    ap.add_argument("--files", action="store_true", help="print the files in visiting order")
    ap.add_argument("--json", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the CLI's arguments, after --")
    a = ap.parse_args(argv)
    args = [x for x in a.command if x != "--"] or [
        "extract", "coin-flip", "--set", "turns=2", "--episodes", "2",
        "--out", str(Path(tempfile.gettempdir()) / "bench-walk.h5"), "--overwrite", "--quiet"]
    w = walk(args)
    if a.json is not None:
        a.json.write_text(json.dumps(w))
        return
    base = _walk_at(a.base, args) if a.base is not None else None
    if base is not None:
        _print(f"base {a.base}", base, a.files)
    _print("this tree", w, a.files)
    s = _summary(w)
    line = " ".join(f"{k}={v}" for k, v in s.items())
    if base is not None:
        b = _summary(base)
        line += " " + " ".join(f"{k}_ratio={s[k] / b[k]:.2f}" for k in ("files", "jumps", "edges"))
    print(line)

if __name__ == "__main__":
    main()
