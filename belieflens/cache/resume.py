"""Resuming an interrupted extraction: the study fingerprint and the windows left to run.

A *study* is everything that decides a cache file's data: environment and its
parameters, seed, episodes, model weights, dtype, device, the options that
change values or batch composition (window, batch budgets, padding, prefix
reuse, storage dtype, saved logits) and a hash of every rendered query. It is the
record :class:`Study`, stored as the root attribute ``study`` (JSON, :meth:`Study.to_json`)
with its SHA-256 ``study_fingerprint``.
A partial file is resumed only if its fingerprint equals the new run's;
extraction runs in windows of ``window`` queries and a window is redone unless
all its rows are complete, so batches are composed exactly as in an
uninterrupted run. CPU threads are not part of the study.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from belieflens.cache.models import ModelInfo
from belieflens.cache.store import SCHEMA_VERSION, PartialState, Sizes, read_partial
from belieflens.errors import CacheFileError
from belieflens.types import DTypeName, KernelName, PaddingSide, StoreDTypeName

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


@dataclass(frozen=True)
class StudyModel:
    """The model part of a study: which weights ran, how."""

    id: str
    weights_hash: str
    dtype: DTypeName
    device: str
    kernels: KernelName

    @classmethod
    def of(cls, info: ModelInfo) -> StudyModel:
        """The study fields of a loaded model's provenance."""
        return cls(id=info.official_id, weights_hash=info.weights_hash, dtype=info.dtype,
                   device=info.device, kernels=info.kernels)


@dataclass(frozen=True)
class StudyOptions:
    """The extraction options that change a file's values or the composition of its batches."""

    window: int
    max_rows: int
    max_tokens: int
    row_tokens: int
    """Rows packed under a tree mask (:func:`belieflens.cache.trie.pack`); stored only when
    not 0, so studies of one edge per row (all runs before packing) keep their fingerprint."""
    padding_side: PaddingSide
    resid_dtype: StoreDTypeName
    save_logits: bool
    prefix_reuse: bool
    cont_resid: bool


@dataclass(frozen=True)
class Study:
    """Everything that decides a cache file's data (see the module docstring).

    Stored flat, as :meth:`to_json`: ``env_name``, ``env_params``, ``seed``,
    ``episodes``, ``model_<field>`` for each field of :class:`StudyModel`, each field of
    :class:`StudyOptions`, ``sizes``, ``queries_sha256`` and ``schema_version``.
    """

    env_name: str
    env_params: Mapping[str, Any]
    seed: int
    episodes: int
    model: StudyModel
    options: StudyOptions
    sizes: Sizes
    queries_sha256: str
    schema_version: int = SCHEMA_VERSION
    rows: tuple[int, int] | None = None
    """For a shard of a study directory, the query rows ``[start, stop)`` of the whole study
    it holds (:mod:`belieflens.cache.shards`); ``None`` (and absent from the JSON) for a
    whole study, so single-file fingerprints are unchanged."""

    def to_json(self) -> dict[str, Any]:
        """The study as the flat JSON-ready mapping stored in the ``study`` attribute."""
        return {
            "schema_version": self.schema_version,
            "env_name": self.env_name,
            "env_params": json.loads(
                json.dumps(dict(self.env_params), sort_keys=True, default=str)
            ),
            "seed": self.seed,
            "episodes": self.episodes,
            **{f"model_{k}": v for k, v in sorted(dataclasses.asdict(self.model).items())},
            **{k: v for k, v in sorted(dataclasses.asdict(self.options).items())
               if not (k == "row_tokens" and v == 0)},
            "sizes": dataclasses.asdict(self.sizes),
            "queries_sha256": self.queries_sha256,
            **({} if self.rows is None else {"rows": list(self.rows)}),
        }

    def fingerprint(self) -> str:
        """SHA-256 of the study's canonical JSON (the ``study_fingerprint`` attribute)."""
        return fingerprint(self.to_json())


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
