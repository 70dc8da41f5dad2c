"""Results files: the tables the docs quote, written by the command that measured them.

A command that measures something the docs quote writes ``docs/results/NAME.md`` (a header
block, then one Markdown table) and ``docs/results/NAME.json`` beside it (the same header
and table, and any raw numbers). A docs page includes the Markdown with the snippet line
``--8<-- "docs/results/NAME.md"``, so a number in the docs is never retyped: rerunning the
command rewrites the file, and ``tests/test_docs.py`` checks that every results file names a
command that exists, that its header is complete, and that its Markdown is the rendering of
its JSON (nobody edited it by hand).

The header records the exact command, the commit, the date, the machine (CPU model, threads,
memory, GPU where used) and the wall time. Under ``make``, the variable
``BELIEFLENS_RESULTS_COMMAND`` names the make command (``make toy-seeds``) so that the
header says what a reader would type; otherwise it is the process's own command line
(``python -m bench.NAME ...`` or ``belieflens ...``).

This module uses the standard library only and sits in the package's lowest layer, so that
every part of the package and every script under ``bench/`` can use it.

Examples:
    A command starts a recorder when it starts (the clock of its wall time), and writes each
    table when done:

    >>> import tempfile
    >>> from pathlib import Path
    >>> from belieflens import results
    >>> folder = Path(tempfile.mkdtemp())
    >>> rec = results.start("python -m bench.toy_train --steps 30", threads=1, folder=folder)
    >>> md = rec.write("toy-train", ["tokens/s, trainer", "plain loop", "ratio"],
    ...                [[3873, 3614, "1.07"]])
    >>> sorted(p.name for p in folder.iterdir())
    ['toy-train.json', 'toy-train.md']
    >>> results.load(folder / "toy-train.json").rows
    (('3873', '3614', '1.07'),)
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

HEADER_FIELDS: tuple[str, ...] = ("command", "commit", "date", "cpu", "threads", "memory",
                                  "gpu", "wall")
"""The header's fields, each required and non-empty (``note`` is optional)."""

COMMAND_VARIABLE = "BELIEFLENS_RESULTS_COMMAND"
"""The environment variable a ``make`` target sets to its own command line."""

FOLDER_VARIABLE = "BELIEFLENS_RESULTS_DIR"
"""The environment variable that moves the results folder (default ``docs/results``)."""

MARK = "<!-- results: written by belieflens.results beside its .json; rerun the command, " \
       "do not edit -->"
"""The first line of every results Markdown file."""


@dataclass(frozen=True)
class Header:
    """How a table was measured: the command, the commit, when, on what, and how long.

    ``threads`` and ``memory`` are text (``"2"``, ``"23.4 GiB"``) so that a table measured
    before this module existed can say what was recorded then. ``note`` says anything else a
    reader needs (a table not rerun: when it was measured and why it was not rerun).
    """

    command: str
    commit: str
    date: str
    cpu: str
    threads: str
    memory: str
    gpu: str
    wall: str
    note: str = ""

    def missing(self) -> list[str]:
        """The required fields that are empty."""
        return [f for f in HEADER_FIELDS if not str(getattr(self, f)).strip()]


@dataclass(frozen=True)
class Results:
    """One results file: its name, header and table (cells as text), and raw numbers."""

    name: str
    header: Header
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    data: Mapping[str, object] = field(default_factory=dict)

    def markdown(self) -> str:
        """The Markdown file: the mark, the header as a collapsed block, then the table."""
        h = self.header
        lines = [MARK, '??? info "How these numbers were measured"',
                 f"    - **command**: `{h.command}`",
                 f"    - **commit**: `{h.commit}`",
                 f"    - **date**: {h.date}",
                 f"    - **machine**: {h.cpu}; threads: {h.threads}; memory: {h.memory}; "
                 f"GPU: {h.gpu}",
                 f"    - **wall time**: {h.wall}"]
        if h.note:
            lines.append(f"    - **note**: {h.note}")
        lines += ["", "| " + " | ".join(_cell(c) for c in self.columns) + " |",
                  "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, object]:
        """The JSON file's content."""
        return {"name": self.name, "header": asdict(self.header),
                "columns": list(self.columns), "rows": [list(r) for r in self.rows],
                "data": dict(self.data)}


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def load(path: Path | str) -> Results:
    """Read a results file's JSON (``NAME.json``) back.

    A file that is not a results file raises ``ValueError`` naming the file and what is
    missing.
    """
    path = Path(path)
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("header"), dict):
        raise ValueError(f"{path}: not a results file (no header)")
    head = raw["header"]
    absent = [f for f in HEADER_FIELDS if f not in head]
    if absent:
        raise ValueError(f"{path}: header lacks {', '.join(absent)}")
    header = Header(**{f: str(head[f]) for f in (*HEADER_FIELDS, "note") if f in head})
    return Results(str(raw.get("name", path.stem)), header,
                   tuple(str(c) for c in raw.get("columns", [])),
                   tuple(tuple(str(c) for c in r) for r in raw.get("rows", [])),
                   dict(raw.get("data") or {}))


# What the header records ---------------------------------------------------------------------


def command_line() -> str:
    """The command a reader would type: ``$BELIEFLENS_RESULTS_COMMAND`` if set (a ``make``
    target), else this process's command line as ``python -m MODULE ARGS`` or
    ``belieflens ARGS``."""
    given = os.environ.get(COMMAND_VARIABLE, "").strip()
    if given:
        return given
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    args = shlex.join(sys.argv[1:])
    if spec is not None and spec.name:
        module = spec.name.removesuffix(".__main__")
        return f"python -m {module} {args}".strip()
    return f"{Path(sys.argv[0]).name} {args}".strip()


def commit(folder: Path | str = ".") -> str:
    """The checkout's commit (12 hex digits), with ``+dirty`` where tracked files of the
    package or the benches differ from it; ``unknown`` outside a git checkout."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                              timeout=30, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "belieflens",
                    "bench", "Makefile")
    except (OSError, subprocess.SubprocessError):
        return "unknown (git did not run)"
    if not head:
        return "unknown (not a git checkout)"
    return head + ("+dirty" if dirty else "")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else the platform's word for it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def memory() -> str:
    """The machine's memory in GiB (``/proc/meminfo``'s MemTotal)."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def default_threads() -> int:
    """``OMP_NUM_THREADS`` where set, else the machine's CPU count."""
    try:
        return int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return os.cpu_count() or 1


def results_folder() -> Path:
    """``$BELIEFLENS_RESULTS_DIR``, else ``docs/results`` under the current folder."""
    return Path(os.environ.get(FOLDER_VARIABLE) or "docs/results")


# Writing --------------------------------------------------------------------------------------


class Recorder:
    """Writes the results files of one command run; made by :func:`start`.

    The wall time in each file's header is the time from :func:`start` to its ``write``.
    """

    def __init__(self, command: str, threads: int, gpu: str, folder: Path) -> None:
        self.command = command
        self.threads = threads
        self.gpu = gpu
        self.folder = folder
        self.started = time.perf_counter()
        self.commit = commit()

    def header(self, note: str = "") -> Header:
        """The header of a file written now."""
        now = datetime.datetime.now(datetime.UTC)
        return Header(command=self.command, commit=self.commit,
                      date=now.strftime("%Y-%m-%d %H:%M UTC"), cpu=cpu_model(),
                      threads=str(self.threads), memory=memory(), gpu=self.gpu,
                      wall=f"{time.perf_counter() - self.started:,.1f} s", note=note)

    def write(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[object]], *,
              note: str = "", data: Mapping[str, object] | None = None) -> Path:
        """Write ``NAME.md`` and ``NAME.json`` into the folder; returns the Markdown's path.

        Cells are written as ``str`` gives them: format numbers before (``f"{x:.4f}"``) to
        choose their digits. A row whose length differs from ``columns``' raises
        ``ValueError``.
        """
        table = tuple(tuple(str(c) for c in row) for row in rows)
        bad = [i for i, row in enumerate(table) if len(row) != len(columns)]
        if bad:
            raise ValueError(f"results {name!r}: rows {bad} do not have {len(columns)} cells")
        result = Results(name, self.header(note), tuple(columns), table, dict(data or {}))
        return save(result, self.folder)


def save(result: Results, folder: Path | str | None = None) -> Path:
    """Write a :class:`Results` as ``NAME.md`` and ``NAME.json`` (each replaced whole, by a
    rename, so a reader never sees half a file); returns the Markdown's path."""
    out = Path(folder) if folder is not None else results_folder()
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"{result.name}.md"
    for path, text in ((out / f"{result.name}.json",
                        json.dumps(result.to_json(), indent=1, ensure_ascii=False) + "\n"),
                       (md, result.markdown())):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return md


def start(command: str | None = None, *, threads: int | None = None, gpu: str = "none",
          folder: Path | str | None = None) -> Recorder:
    """Start recording a command's results (its wall time starts now).

    Args:
        command: the command line to record; default :func:`command_line`.
        threads: the threads the command computes on; default :func:`default_threads`.
        gpu: the GPU used (its name), or ``"none"``.
        folder: where the files go; default :func:`results_folder`.
    """
    return Recorder(command or command_line(),
                    threads if threads is not None else default_threads(), gpu,
                    Path(folder) if folder is not None else results_folder())
