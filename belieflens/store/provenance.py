"""Provenance attributes recorded at the root of every cache file."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.metadata
import subprocess
from pathlib import Path
from typing import Any

from belieflens.model.load import ModelInfo


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def git_commit() -> str:
    """The git commit of the belieflens source tree, or ``unknown`` outside a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
        capture_output=True, text=True, timeout=5,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def provenance(
    info: ModelInfo,
    *,
    env: str,
    env_params: dict[str, Any],
    seed: int,
    episodes: int,
    threads: int,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The root attributes of a cache file: enough to rerun it.

    An untrained control (:mod:`belieflens.model.init`) adds ``model_init`` (``random`` or
    ``shuffled``), ``model_init_seed`` and ``model_base_weights_hash`` to the model's spec
    and id; a trained model's file has ``model_init = trained``."""
    attrs: dict[str, Any] = {
        "belieflens_version": _version("belieflens"),
        "git_commit": git_commit(),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "env_name": env,
        "env_params": env_params,
        "seed": seed,
        "episodes": episodes,
        "threads": threads,
        "torch_version": _version("torch"),
        "transformers_version": _version("transformers"),
        "transformer_lens_version": _version("transformer-lens"),
    }
    for k, v in dataclasses.asdict(info).items():
        if info.init == "trained" and k in ("init_seed", "base_weights_hash"):
            continue  # a trained model's file says init = trained, and no control's seed
        attrs[f"model_{k}" if not k.startswith(("model", "tokenizer", "chat", "weights",
                                                 "dtype", "device")) else k] = v
    attrs["model_id"] = info.official_id
    attrs["model_revision"] = info.revision
    if extra:
        attrs.update(extra)
    return attrs
