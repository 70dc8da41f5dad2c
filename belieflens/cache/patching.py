"""Bind a replacement ``forward`` to bridge modules for the length of a block."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["bound_forward"]


@contextlib.contextmanager
def bound_forward(modules: Sequence[Any], forward: Callable[..., Any]) -> Iterator[None]:
    """Make ``forward`` each module's own ``forward`` (a bound method) inside the block.

    The instance attribute is set past the bridge's ``__setattr__`` (which would hand
    ``forward`` to the wrapped HF module) and removed on exit, so the class's forward
    is back even when the block raises.
    """
    for m in modules:
        object.__setattr__(m, "forward", types.MethodType(forward, m))
    try:
        yield
    finally:
        for m in modules:
            m.__dict__.pop("forward", None)
