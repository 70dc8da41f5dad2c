"""One writer per cache file: an exclusive ``flock`` on ``<out>.lock``.

The operating system releases an ``flock`` when its process dies, so a crashed
or killed extraction never leaves a stale lock behind (the lock *file* may stay;
it is reused). A second writer is refused at once with one line. The lock is
re-entrant within one process (an extraction takes it once, before loading its model:
:class:`belieflens.run.lifecycle.Extraction`).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from belieflens.errors import CacheFileError

_held: dict[str, tuple[int, int]] = {}
"""Resolved lock path -> (file descriptor, hold count) for locks held by this process."""


def lock_path(out: Path) -> Path:
    """The lock file guarding ``out`` and its partial file."""
    return out.with_name(out.name + ".lock")


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


def _acquire(path: Path, out: Path) -> int:
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise CacheFileError(
                f"option '--out' = '{out}' is not allowed: cannot create lock file {path} "
                f"({e.strerror})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise CacheFileError(
                f"{out} is being written by another process{_holder(path)}: wait for it to "
                f"finish or choose another --out (lock {path.name})"
            ) from None
        # the previous holder may have unlinked the file between our open and flock
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            with suppress(OSError):  # the holder's pid is a courtesy: a full disk keeps it out
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


@contextmanager
def write_lock(out: Path) -> Iterator[Path]:
    """Hold the exclusive write lock of ``out`` for the block; raise CacheFileError if taken."""
    path = lock_path(out)
    key = str(path.resolve())
    if key in _held:
        fd, count = _held[key]
        _held[key] = (fd, count + 1)
    else:
        _held[key] = (_acquire(path, out), 1)
    try:
        yield path
    finally:
        fd, count = _held[key]
        if count > 1:
            _held[key] = (fd, count - 1)
        else:
            del _held[key]
            with suppress(OSError):
                os.unlink(path)
            os.close(fd)
