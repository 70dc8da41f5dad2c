"""Named option sets (``Literal`` aliases) used across the package."""

from __future__ import annotations

from typing import Literal, get_args

Role = Literal["system", "user", "assistant"]
"""Who speaks a chat message."""

Delivery = Literal["single-turn", "multi-turn", "multi-turn-self"]
"""How evidence reaches the model: all at once, or as a running conversation."""

PromptFormat = Literal["chat", "raw"]
"""``chat`` applies the model's chat template; ``raw`` is plain text completion."""

DebiasMethod = Literal["geometric", "arithmetic"]
"""How beliefs are pooled over Latin-square rotations."""

DeviceName = Literal["cpu", "cuda", "auto"]
"""Where the model runs."""

DTypeName = Literal["float32", "bfloat16", "float16"]
"""Model compute dtype."""

StoreDTypeName = Literal["float32", "float16"]
"""Storage dtype of residuals in the cache file (float32 by default: see DESIGN.md)."""

PaddingSide = Literal["left", "right"]
"""Where pad tokens go in a batch."""

DELIVERIES: tuple[Delivery, ...] = get_args(Delivery)
DEBIAS_METHODS: tuple[DebiasMethod, ...] = get_args(DebiasMethod)
DEVICES: tuple[DeviceName, ...] = get_args(DeviceName)
DTYPES: tuple[DTypeName, ...] = get_args(DTypeName)

KernelName = Literal["auto", "default", "onednn"]
"""CPU linear kernels: PyTorch's default GEMM, oneDNN's, or ``auto`` (oneDNN on CPU where it
passes a check at load; see :mod:`belieflens.model.kernels`)."""

ScenarioKind = Literal["normalisation", "monotonicity", "extensionality"]
"""The three kinds of Dutch-book scenario: complement pair, nested chain, two wordings.

Defined here because both the environment (:mod:`belieflens.envs.dutch_book`) and its
analysis (the sure-loss constructions) need it."""

SCENARIO_KINDS: tuple[ScenarioKind, ...] = get_args(ScenarioKind)
"""All scenario kinds, in order."""

SectionName = Literal[
    "dutch-book", "protein-world", "belief-attribution", "recommender", "judgment", "revealed",
    "twenty-questions",
]
"""An environment-specific section of ``belieflens analyze``; each environment class lists the
sections it needs (``sections``), and :mod:`belieflens.analysis.sections` implements each."""

SECTION_NAMES: tuple[SectionName, ...] = get_args(SectionName)
"""All section names, in order."""
