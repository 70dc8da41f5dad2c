"""The manifest of a study directory: which shards make the study, and how far each got.

A *study directory* (``belieflens extract ... --cluster ... --out DIR``) holds one cache file
per shard, ``shard-00000.h5``, ``shard-00001.h5``, ... (each a standalone file of the cache
schema holding the query rows ``[start, stop)`` of the study, a run of whole windows) and
``manifest.json``::

    {"format": "belieflens-study", "version": 1, "state": "running" | "complete",
     "study_fingerprint": "<sha256 of the whole study>", "study": {...},
     "queries": N, "window": W,
     "shards": [{"file": "shard-00000.h5", "rows": [0, 2048], "episodes": [0, 22],
                 "state": "pending" | "done"}, ...]}

``episodes`` is the first and last episode with a row in the shard (a window may cut an
episode, which then spans two shards). Only the process that drives the run writes the
manifest, always whole: to a temporary file, synced, then renamed over the old one. A
study whose environment generates text also has ``generations.json``
(:data:`GENERATIONS_NAME`), written the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from belieflens.errors import CacheFileError

MANIFEST_NAME = "manifest.json"
"""The manifest's file name inside a study directory."""

FORMAT = "belieflens-study"
VERSION = 1

ShardState = Literal["pending", "done"]
StudyState = Literal["running", "complete"]


def shard_name(index: int) -> str:
    """The file name of shard ``index``: ``shard-00000.h5``."""
    return f"shard-{index:05d}.h5"


@dataclass(frozen=True)
class ShardEntry:
    """One shard of a study directory."""

    file: str
    rows: tuple[int, int]
    """Query rows ``[start, stop)`` of the whole study."""
    episodes: tuple[int, int]
    """First and last episode with a row in the shard."""
    state: ShardState = "pending"


@dataclass(frozen=True)
class Manifest:
    """A study directory's manifest (see the module docstring)."""

    study_fingerprint: str
    study: Mapping[str, Any]
    queries: int
    window: int
    shards: tuple[ShardEntry, ...]
    state: StudyState = "running"

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON-ready data."""
        return {
            "format": FORMAT, "version": VERSION, "state": self.state,
            "study_fingerprint": self.study_fingerprint, "study": dict(self.study),
            "queries": self.queries, "window": self.window,
            "shards": [{"file": s.file, "rows": list(s.rows), "episodes": list(s.episodes),
                        "state": s.state} for s in self.shards],
        }

    def with_shard(self, index: int, state: ShardState) -> Manifest:
        """A copy with shard ``index`` in ``state``."""
        shards = list(self.shards)
        shards[index] = replace(shards[index], state=state)
        return replace(self, shards=tuple(shards))

    def check_cover(self, where: Path) -> None:
        """The shards' rows cover ``[0, queries)`` in order, with no gap and no overlap."""
        at = 0
        for s in self.shards:
            if s.rows[0] != at or s.rows[1] <= s.rows[0]:
                what = "a gap" if s.rows[0] > at else "a duplicate"
                raise CacheFileError(
                    f"{where}: shard {s.file} holds rows [{s.rows[0]}, {s.rows[1]}) after row "
                    f"{at}: {what} in the study's rows"
                )
            at = s.rows[1]
        if at != self.queries:
            raise CacheFileError(
                f"{where}: the shards hold {at} of the study's {self.queries} rows"
            )


def manifest_path(directory: Path) -> Path:
    """Where a study directory's manifest lives."""
    return directory / MANIFEST_NAME


def read_manifest(directory: Path) -> Manifest:
    """Read and check a study directory's manifest, or raise one line (:class:`CacheFileError`)."""
    path = manifest_path(directory)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CacheFileError(f"{directory} is not a study directory: no {MANIFEST_NAME}") from None
    except (OSError, ValueError) as e:
        raise CacheFileError(f"{path} is unreadable: {e}") from None
    try:
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise CacheFileError(f"{path} is not a belieflens study manifest (version {VERSION})")
        shards = tuple(
            ShardEntry(file=str(s["file"]), rows=(int(s["rows"][0]), int(s["rows"][1])),
                       episodes=(int(s["episodes"][0]), int(s["episodes"][1])),
                       state=_shard_state(s["state"]))
            for s in data["shards"]
        )
        state: StudyState = "complete" if data["state"] == "complete" else "running"
        m = Manifest(study_fingerprint=str(data["study_fingerprint"]), study=data["study"],
                     queries=int(data["queries"]), window=int(data["window"]), shards=shards,
                     state=state)
    except CacheFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise CacheFileError(f"{path} is damaged: {type(e).__name__} {e}") from None
    m.check_cover(path)
    return m


def _shard_state(value: object) -> ShardState:
    if value == "done":
        return "done"
    if value == "pending":
        return "pending"
    raise ValueError(f"unknown shard state {value!r}")


def _write_atomic(path: Path, data: Any, *, indent: int | None = None) -> None:
    """Write ``data`` as JSON atomically: a temporary file, synced, renamed over the old one."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=indent, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(directory: Path, manifest: Manifest) -> None:
    """Write the manifest atomically: a temporary file, synced, renamed over the old one."""
    _write_atomic(manifest_path(directory), manifest.to_json(), indent=1)


GENERATIONS_NAME = "generations.json"
"""The generated text of a study whose environment generates some (``multi-turn-self``, user
simulators, model-driven environments), written once by the driving process from the
planning task's run, and replayed by every shard task instead of generating again::

    {"format": "belieflens-generations", "version": 1, "study_fingerprint": "<sha256>",
     "records": [<GenerationRecord.to_json()>, ...]}
"""

GENERATIONS_FORMAT = "belieflens-generations"


def write_generations(directory: Path, fingerprint: str,
                      records: Sequence[Mapping[str, Any]]) -> None:
    """Write a study's generation records atomically (see :data:`GENERATIONS_NAME`)."""
    _write_atomic(directory / GENERATIONS_NAME,
                  {"format": GENERATIONS_FORMAT, "version": VERSION,
                   "study_fingerprint": fingerprint, "records": list(records)})


def read_generations(directory: Path, fingerprint: str) -> list[dict[str, Any]]:
    """The generation records of study ``fingerprint`` in ``directory``, or one line
    (:class:`CacheFileError`) when the file is missing, damaged or of another study."""
    path = directory / GENERATIONS_NAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CacheFileError(f"{directory} has no {GENERATIONS_NAME}: rerun the same "
                             "`belieflens extract` command, which writes it") from None
    except (OSError, ValueError) as e:
        raise CacheFileError(f"{path} is unreadable: {e}") from None
    if not isinstance(data, dict) or data.get("format") != GENERATIONS_FORMAT:
        raise CacheFileError(f"{path} is not a belieflens generations file")
    if data.get("study_fingerprint") != fingerprint:
        raise CacheFileError(
            f"{path} holds the generations of another study (fingerprint "
            f"{str(data.get('study_fingerprint'))[:12]}, this study's {fingerprint[:12]})"
        )
    records = data.get("records")
    if not isinstance(records, list):
        raise CacheFileError(f"{path} is damaged: no list of records")
    return records


def layout(
    queries: int, window: int, shard_windows: int, episode_of_row: Sequence[int]
) -> tuple[ShardEntry, ...]:
    """Cut ``queries`` rows into shards of ``shard_windows`` whole windows each."""
    step = window * shard_windows
    out = []
    for i, a in enumerate(range(0, queries, step)):
        b = min(a + step, queries)
        out.append(ShardEntry(file=shard_name(i), rows=(a, b),
                              episodes=(int(episode_of_row[a]), int(episode_of_row[b - 1]))))
    return tuple(out)
