"""Time spent writing the HDF5 cache file during :func:`belieflens.run.extract.extract`.

``with WriteTimer() as t: extract(...)`` then ``t.seconds``: the time inside
``create_partial`` (allocating the file and writing every static value),
``PartialFile.write_rows`` (each window, synced) and ``PartialFile.finish``
(the final rename), measured by wrapping those three functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import belieflens.run.extract as extract_mod
from belieflens.store.file import PartialFile


class WriteTimer:
    """Accumulate the seconds spent in the cache file's writers while active."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, owner: Any, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        self._saved.append((owner, name, original))
        setattr(owner, name, timed)

    def __enter__(self) -> WriteTimer:
        self._wrap(extract_mod, "create_partial")
        self._wrap(PartialFile, "write_rows")
        self._wrap(PartialFile, "finish")
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
