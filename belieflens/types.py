"""Named option sets (``Literal`` aliases) used across the package."""

from __future__ import annotations

from typing import Literal, get_args

Role = Literal["system", "user", "assistant"]
"""Who speaks a chat message."""

Delivery = Literal["single-turn", "multi-turn", "multi-turn-self"]
"""How evidence reaches the model: all at once, or as a running conversation."""

SpanRole = Literal["evidence", "summary", "question"]
"""What a marked stretch of a message is: one turn's evidence, a summary of the evidence so
far (counts), or the belief question; unmarked text is the template."""

PromptFormat = Literal["chat", "raw", "tokens"]
"""``chat`` applies the model's chat template; ``raw`` is plain text completion; ``tokens``
is a space-separated sequence of vocabulary words fed as their ids (token-level processes)."""

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
