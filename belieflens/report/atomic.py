"""Reports written whole or not at all: a staging folder beside ``--out``, moved into place.

:func:`staged` gives the folder a report is written into: ``.<name>.partial-<pid>`` beside
``out``, on the same filesystem, so that every move is a rename. When the block ends
without error, its entries are moved into ``out``: a new ``out`` is the staging folder
renamed; into an existing one, each entry replaces the previous report's entry of that name
(figures and folders first, ``.md`` and ``.html`` pages last), and anything else there stays
(the cache file beside ``make demo``'s report, say). Signals are only noted while the
entries move. On any error, a full disk or a signal included, the staging folder is
removed: the previous report is untouched and no partial one is left, and a storage fault
or a signal is one line. A staging folder a killed run left behind is removed by the next
report into the same ``out``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from belieflens.errors import InterruptedRunError, ParameterError
from belieflens.run import signals
from belieflens.store import space
from belieflens.store.file import fsync


@dataclass(frozen=True)
class Staging:
    """Where a report is written (``folder``) and where it goes once whole (``out``)."""

    folder: Path
    out: Path


def final(stage: Staging | None, paths: Sequence[Path]) -> tuple[Path, ...]:
    """``paths`` written in ``stage``'s folder as they are once moved into its ``out``
    (unchanged without a stage)."""
    if stage is None:
        return tuple(paths)
    return tuple(stage.out / p.relative_to(stage.folder) if p.is_relative_to(stage.folder)
                 else p for p in paths)


def _prefix(out: Path) -> str:
    return f".{out.name}.partial-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clear_stale(out: Path) -> None:
    """Remove staging folders of ``out`` that runs no longer alive left behind."""
    for old in out.parent.glob(f"{_prefix(out)}*"):
        pid = old.name.removeprefix(_prefix(out))
        if not pid.isdigit() or not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)


def _move(folder: Path, out: Path) -> None:
    """Move the staged report into ``out`` (see the module's docstring); ``folder`` goes."""
    if not out.exists():
        os.rename(folder, out)
        fsync(out.parent)
        return
    for entry in sorted(folder.iterdir(), key=lambda p: (p.suffix in (".md", ".html"), p.name)):
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            os.rename(target, folder / f".previous-{entry.name}")  # removed with the folder
        os.replace(entry, target)
    fsync(out)
    shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def staged(out: Path | None) -> Iterator[Staging | None]:
    """The staging folder of a report into ``out`` (``None``: no report, nothing staged),
    moved into place when the block ends without error, removed when it does not."""
    if out is None:
        yield None
        return
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it is a file")
    folder = out.parent / f"{_prefix(out)}{os.getpid()}"
    with signals.handled() as stop:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            _clear_stale(out)
            folder.mkdir()
            yield Staging(folder, out)
            with stop.now("defer"):
                _move(folder, out)
        except BaseException as e:
            with contextlib.suppress(OSError):
                shutil.rmtree(folder)
            _raise_line(e, out)
            raise


def _raise_line(e: BaseException, out: Path) -> None:
    """Raise a storage fault or a signal that stopped a report as one line (else return)."""
    kept = "the previous report, if any, is untouched"
    kind = space.fault(e)
    if kind is not None:
        raise space.fault_error(kind, out, f"while writing the report into {out}",
                                f"rerun ({kept})") from None
    if isinstance(e, InterruptedRunError):
        raise InterruptedRunError(f"{e}: no report written into {out} ({kept})",
                                  e.signum) from None
