"""The C heap of this process: glibc's ``malloc_trim`` and its arena limit (no-ops elsewhere).

Long runs free and reallocate large blocks window after window (extraction) or chunk after
chunk (analysis on dask threads). glibc keeps what is freed: :func:`release_freed_memory`
hands it back to the OS, and :func:`limit_arenas` caps the per-thread arenas glibc creates
(up to 8 per core), each of which otherwise keeps its own freed memory, so that the peak of
a threaded analysis grows with the number of chunks its threads have touched.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

ARENAS = 2
"""Default arena limit: one for the main thread, one shared by worker threads."""

_M_ARENA_MAX = -8  # mallopt parameter number, glibc's malloc.h


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, looked up once (``find_library`` runs a subprocess); None where it is not."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    return lib if hasattr(lib, "malloc_trim") and hasattr(lib, "mallopt") else None


def release_freed_memory() -> None:
    """Hand memory freed so far back to the OS (``malloc_trim(0)``).

    Without it, the heap fragments window after window and the peak RSS of a long
    extraction creeps up with the number of windows (``bench/memory.py``).
    """
    lib = _libc()
    if lib is not None:
        lib.malloc_trim(0)


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process and the processes it starts.

    Sets ``M_ARENA_MAX`` now (it takes effect for arenas not yet created, so call it early:
    the CLI does at start) and ``MALLOC_ARENA_MAX`` in the environment unless already set,
    so Dask worker processes started afterwards (``local:N``) get the same limit. An
    explicit ``MALLOC_ARENA_MAX`` wins. Returns whether the limit was set here.
    """
    lib = _libc()
    if lib is None or arenas < 1:
        return False
    value = os.environ.setdefault("MALLOC_ARENA_MAX", str(arenas))
    try:
        n = int(value)
    except ValueError:
        return False
    return bool(n >= 1 and lib.mallopt(_M_ARENA_MAX, n) == 1)
