"""The model's own normalization on the bridge, without its hook-only recomputation.

TransformerLens' ``NormalizationBridge`` (native-autograd mode, the one used for
RMSNorm models such as Llama and Qwen2) computes the normalization twice on every
call: once step by step, so that ``hook_scale`` and ``hook_normalized`` can fire,
and once through the wrapped HF module, whose output it returns unless one of
those two hooks edited its value. Extraction hooks neither. Inside
:func:`native_norms` each such module runs ``hook_in``, the HF module and
``hook_out`` only: the same tensor the bridge returns when no hook edits, so the
result is bit-identical (tested in ``tests/model/test_norms.py``). A module
falls back to the bridge's own forward, per call, whenever a hook is attached to
its scale or normalized value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from belieflens.model.patching import bound_forward, hooked

__all__ = ["native_forward", "native_modules", "native_norms"]


def _is_native(module: Any) -> bool:
    """Whether ``module`` is a bridge norm whose unhooked result is its HF module's output."""
    import torch
    from transformer_lens.model_bridge.generalized_components.normalization import (
        NormalizationBridge,
    )
    from transformer_lens.model_bridge.generalized_components.rms_normalization import (
        RMSNormalizationBridge,
    )

    if type(module) not in (NormalizationBridge, RMSNormalizationBridge):
        return False
    hf = module.original_component
    if hf is None or isinstance(hf, torch.nn.Identity) or module.training:
        return False
    folding = bool(getattr(module.config, "layer_norm_folding", False))
    return bool(module.use_native_layernorm_autograd) or folding


def native_modules(bridge: Any) -> list[Any]:
    """The normalization modules of ``bridge`` that :func:`native_norms` switches."""
    return [m for m in bridge.modules() if _is_native(m)]


def native_forward(self: Any, hidden_states: Any, **kwargs: Any) -> Any:
    """The bridge norm's forward as ``hook_out(hf(hook_in(x)))``, cast to the input's dtype.

    Bound as a method of a native-autograd ``NormalizationBridge``; falls back to the
    class's own forward while its scale or normalized value is hooked.
    """
    if hooked(self, ("hook_scale", "hook_normalized")):
        return type(self).forward(self, hidden_states, **kwargs)
    x = self.hook_in(hidden_states)
    result = self.original_component(x)
    if result.dtype != x.dtype:
        result = result.to(x.dtype)
    return self.hook_out(result)


@contextlib.contextmanager
def native_norms(bridge: Any, *, modules: list[Any] | None = None) -> Iterator[int]:
    """Run ``bridge``'s native-autograd norms as their HF modules alone inside the block.

    Yields how many modules were switched; their own forwards are restored on exit.
    ``modules``: :func:`native_modules` of ``bridge``, when the caller computed it once.
    """
    mods = native_modules(bridge) if modules is None else modules
    with bound_forward(mods, native_forward):
        yield len(mods)
