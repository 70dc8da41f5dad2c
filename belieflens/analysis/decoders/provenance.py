"""Provenance of a fitted decoder (saved with it as JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Literal

DecoderKind = Literal["ridge", "softmax"]
"""``ridge``: scalar (or vector) targets; ``softmax``: distributions over outcomes."""


def package_version() -> str:
    """The installed belieflens version (``unknown`` if not installed)."""
    try:
        return metadata.version("belieflens")
    except metadata.PackageNotFoundError:  # pragma: no cover - editable installs have it
        return "unknown"


@dataclass(frozen=True)
class DecoderProvenance:
    """Where a fitted decoder comes from; saved with it as JSON."""

    kind: DecoderKind
    """``ridge`` or ``softmax``."""
    target: str
    """Name of the target quantity (e.g. ``posterior_mean``, ``oracle``)."""
    layer: int | None
    """Residual layer the decoder reads (0 = embeddings), if known."""
    lam: float
    """L2 penalty used (standardised units, see the module docstring)."""
    n_train: int
    """Number of training rows."""
    d_model: int
    """Input width."""
    n_outputs: int
    """Number of outputs (targets for ridge, outcomes for softmax)."""
    model_id: str | None = None
    """Model id the residuals came from, if provided."""
    belieflenspackage_version: str = ""
    """Package version that fitted the decoder."""
