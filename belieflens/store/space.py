"""Room on a filesystem: what a write needs against what is free, and storage faults in one line.

A write that knows its size beforehand (a cache file's storage is allocated up front) calls
:func:`require` first: with less free than it needs, one line names the path, its
filesystem, what is needed and what is free, and nothing is written. A fault in the middle of
a write (no space left, an I/O error) is recognised by :func:`fault` in whatever form the
library raised it (h5py raises ``OSError``, ``ValueError`` or ``RuntimeError`` whose message
carries HDF5's ``errno``) and told in one line by :func:`fault_error`.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Final

from belieflens.errors import StorageError

NO_SPACE: Final = "no space left"
IO_ERROR: Final = "I/O error"

_KINDS: dict[int, str] = {errno.ENOSPC: NO_SPACE, errno.EDQUOT: NO_SPACE, errno.EIO: IO_ERROR}
_TEXTS: dict[str, str] = {"No space left on device": NO_SPACE, "Disk quota exceeded": NO_SPACE,
                          "Input/output error": IO_ERROR}
_ERRNO = re.compile(r"errno = (\d+)")
_ADVICE: dict[str, str] = {NO_SPACE: "free space", IO_ERROR: "check the disk"}


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem that holds ``path`` (or would hold it)."""
    p = _existing(path).resolve()
    dev = p.stat().st_dev
    while p != p.parent and p.parent.stat().st_dev == dev:
        p = p.parent
    return p


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still write on the filesystem of ``path``."""
    st = os.statvfs(_existing(path))
    return st.f_bavail * st.f_frsize


def size_text(n: int) -> str:
    """``n`` bytes for a person: ``'9.1 MB'``, ``'512 bytes'``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def require(path: Path, needed: int) -> None:
    """Refuse in one line (:class:`StorageError`) to write ``needed`` bytes to ``path`` when its
    filesystem has less free: the path, the filesystem, what is needed and what is free."""
    free = free_bytes(path.parent)
    if needed > free:
        raise StorageError(
            f"not enough space on {mount_point(path)} for {path}: {size_text(needed)} needed, "
            f"{size_text(free)} free; free space or choose another --out"
        )


def fault(e: BaseException | None) -> str | None:
    """:data:`NO_SPACE` or :data:`IO_ERROR` when ``e``, or an exception it was raised from or
    while handling, is that storage fault; else ``None``."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _KINDS:
            return _KINDS[e.errno]
        if isinstance(e, (OSError, ValueError, RuntimeError)):
            text = str(e)
            code = _ERRNO.search(text)
            if code is not None and int(code.group(1)) in _KINDS:
                return _KINDS[int(code.group(1))]
            for needle, kind in _TEXTS.items():
                if needle in text:
                    return kind
        e = e.__cause__ or e.__context__
    return None


def fault_error(kind: str, path: Path, what: str, then: str) -> StorageError:
    """The one line of a storage fault: ``'<kind> on <filesystem> <what>; <advice> and
    <then>'``, e.g. ``'no space left on /data after 12 of 40 read-outs; free space and rerun
    to resume'``."""
    return StorageError(f"{kind} on {mount_point(path)} {what}; {_ADVICE[kind]} and {then}")
