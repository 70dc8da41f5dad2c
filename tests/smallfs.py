"""A small real filesystem for the storage-fault tests: a tmpfs mounted for one test.

Mounting needs root (or CAP_SYS_ADMIN); where the test cannot mount one it is skipped with
the reason, and the same fault is still tested by patching ``os.statvfs`` or wrapping a
write (tests/run/test_faults.py, tests/report/test_atomic_report.py).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_fs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``'2m'``) mounted at ``folder`` for the block, unmounted after;
    the calling test is skipped where none can be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the fault is tested by patching too")
    folder.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}); the fault is tested by "
                    "patching too")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def leftovers(folder: Path) -> list[str]:
    """Names in ``folder`` (recursively) but lock files: what a failed run left behind."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if not p.name.endswith(".lock"))
