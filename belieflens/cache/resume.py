"""Resuming an interrupted extraction: the study fingerprint and the windows left to run.

A *study* is everything that decides a cache file's data: environment and its
parameters, seed, episodes, model weights, dtype, device, the options that
change values or batch composition (window, batch budgets, padding, prefix
reuse, storage dtype, saved logits) and a hash of every rendered query. It is
stored as the root attribute ``study`` (JSON) with its SHA-256 ``study_fingerprint``.
A partial file is resumed only if its fingerprint equals the new run's;
extraction runs in windows of ``window`` queries and a window is redone unless
all its rows are complete, so batches are composed exactly as in an
uninterrupted run. CPU threads are not part of the study.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from belieflens.cache.store import SCHEMA_VERSION, PartialState, read_partial
from belieflens.errors import CacheFileError

STUDY_ATTR = "study"
"""Root attribute holding the study as JSON."""

FINGERPRINT_ATTR = "study_fingerprint"
"""Root attribute holding the SHA-256 of the study."""


def queries_hash(rows: Iterable[Sequence[Any]]) -> str:
    """SHA-256 over rows of JSON-serialisable values (one row per rendered query)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(list(row), sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()


def study(
    *,
    env_name: str,
    env_params: Mapping[str, Any],
    seed: int,
    episodes: int,
    model: Mapping[str, Any],
    options: Mapping[str, Any],
    sizes: Mapping[str, int],
    queries: str,
) -> dict[str, Any]:
    """The study of a run as a flat JSON-ready mapping (see the module docstring)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "env_name": env_name,
        "env_params": json.loads(json.dumps(dict(env_params), sort_keys=True, default=str)),
        "seed": seed,
        "episodes": episodes,
        **{f"model_{k}": v for k, v in sorted(model.items())},
        **{k: v for k, v in sorted(options.items())},
        "sizes": dict(sizes),
        "queries_sha256": queries,
    }


def fingerprint(s: Mapping[str, Any]) -> str:
    """SHA-256 of a study's canonical JSON."""
    return hashlib.sha256(json.dumps(s, sort_keys=True, default=str).encode()).hexdigest()


def differences(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = 3) -> str:
    """``'seed 0 -> 1, window 4 -> 8'``: the first keys whose values differ."""
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    parts = [f"{k} {_short(old.get(k))} -> {_short(new.get(k))}" for k in keys[:limit]]
    if len(keys) > limit:
        parts.append(f"and {len(keys) - limit} more")
    return ", ".join(parts)


def _short(v: Any) -> str:
    text = json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 24 else text[:21] + "..."


def windows(n: int, window: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in windows of ``window`` rows."""
    return [(s, min(s + window, n)) for s in range(0, n, window)]


def done_windows(complete: np.ndarray, wins: Sequence[tuple[int, int]]) -> set[int]:
    """Indices of windows whose rows are all complete."""
    return {i for i, (a, b) in enumerate(wins) if bool(complete[a:b].all())}


def resumable(partial: Path, new: Mapping[str, Any], *, overwrite: bool) -> PartialState | None:
    """The state of ``partial`` if it can be resumed for study ``new``, else ``None`` (start over).

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
    if fingerprint(old) != fingerprint(new):
        if overwrite:
            partial.unlink()
            return None
        raise CacheFileError(
            f"{partial} is a partial file of another study ({differences(old, new)}): pass "
            "--overwrite to discard it, or rerun with its options to resume it"
        )
    return state
