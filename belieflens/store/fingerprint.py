"""The study record of a cache file: everything that decides its data, and its fingerprint.

A *study* is everything that decides a cache file's data: environment and its
parameters, seed, episodes, model weights, dtype, device, the options that
change values or batch composition (window, batch budgets, padding, prefix
reuse, storage dtype, saved logits) and a hash of every rendered query. It is the
record :class:`Study`, stored as the root attribute ``study`` (JSON, :meth:`Study.to_json`)
with its SHA-256 ``study_fingerprint``. CPU threads are not part of the study. A partial
file is resumed (:mod:`belieflens.run.resume`) only if its fingerprint equals the new run's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from belieflens.model.load import ModelInfo
from belieflens.store.file import SCHEMA_VERSION, Sizes
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
    """Rows packed under a tree mask (:func:`belieflens.run.trie.pack`); stored only when
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
    it holds (:mod:`belieflens.run.shards`); ``None`` (and absent from the JSON) for a
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
            # the token-text table is the tokenizer's decoding of ids both fingerprinted
            # already (model, queries_sha256): its size stays out, so fingerprints are those
            # of files written before the table
            # ``state`` only where a file has one (token-level processes), so other files'
            # fingerprints are unchanged
            "sizes": {k: v for k, v in dataclasses.asdict(self.sizes).items()
                      if k != "text_token" and not (k == "state" and v == 0)},
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
