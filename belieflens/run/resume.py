"""Resuming an interrupted extraction: the windows left to run.

Extraction runs in windows of ``window`` queries and a window is redone unless all its rows
are complete, so batches are composed exactly as in an uninterrupted run. A partial file is
resumed only if its study fingerprint (:mod:`belieflens.store.fingerprint`) equals the new
run's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from belieflens.errors import CacheFileError
from belieflens.store.file import PartialState, read_partial
from belieflens.store.fingerprint import (
    FINGERPRINT_ATTR,
    STUDY_ATTR,
    Study,
    differences,
    fingerprint,
)


def windows(n: int, window: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in windows of ``window`` rows."""
    return [(s, min(s + window, n)) for s in range(0, n, window)]


def done_windows(complete: np.ndarray, wins: Sequence[tuple[int, int]]) -> set[int]:
    """Indices of windows whose rows are all complete."""
    return {i for i, (a, b) in enumerate(wins) if bool(complete[a:b].all())}


def resumable(partial: Path, study: Study, *, overwrite: bool) -> PartialState | None:
    """The state of ``partial`` if it can be resumed for ``study``, else ``None`` (start over).

    A partial file of another study, or a damaged one, raises
    :class:`CacheFileError` unless ``overwrite``, in which case it is deleted.
    """
    if not partial.exists():
        return None
    try:
        state = read_partial(partial)
        stored = state.attrs.get(STUDY_ATTR)
        if stored is None:
            raise CacheFileError(f"{partial} has no study attribute: not a resumable partial file")
        try:
            old = json.loads(stored)
        except ValueError:
            raise CacheFileError(f"{partial} has an unreadable study attribute") from None
        if state.attrs.get(FINGERPRINT_ATTR) != fingerprint(old) or not isinstance(old, dict):
            raise CacheFileError(f"{partial} is damaged: its study fingerprint does not match")
        if state.attrs.get("status") != "building":
            raise CacheFileError(f"{partial} has status {state.attrs.get('status')!r}")
    except CacheFileError as e:
        if overwrite:
            partial.unlink()
            return None
        raise CacheFileError(f"{e}; pass --overwrite to discard it and start again") from None
    new = study.to_json()
    if fingerprint(old) != fingerprint(new):
        if overwrite:
            partial.unlink()
            return None
        raise CacheFileError(
            f"{partial} is a partial file of another study ({differences(old, new)}): pass "
            "--overwrite to discard it, or rerun with its options to resume it"
        )
    return state
