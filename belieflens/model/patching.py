"""Bind a replacement ``forward`` to bridge modules for the length of a block, and tell
whether a module's hook points have hooks (then the bridge's own forward is needed)."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["bound_forward", "hooked"]


def hooked(module: Any, names: Sequence[str]) -> bool:
    """Whether any hook (forward, pre-forward or backward) is attached to the hook points
    ``names`` of ``module``: a fast path that skips computing their values must step aside."""
    for name in names:
        hp = getattr(module, name, None)
        if hp is not None and (hp._forward_hooks or hp._forward_pre_hooks
                               or hp._backward_hooks or hp._backward_pre_hooks):
            return True
    return False


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
