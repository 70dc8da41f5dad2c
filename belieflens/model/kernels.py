"""CPU linear kernels: oneDNN's linear in place of the default GEMM (``--kernels onednn``).

On AMD CPUs PyTorch's default fp32 GEMM takes MKL's generic path, while oneDNN (bundled
with every CPU build of torch) is tuned for the CPU it runs on, so routing every
``nn.Linear`` of the model through ``torch.ops.mkldnn._linear_pointwise`` speeds
extraction up there; on Intel CPUs MKL takes its tuned path and oneDNN gains nothing.

``auto`` (the default) uses oneDNN on a CPU that is not Intel's when the op exists and
reproduces the default kernels on a random layer within 1e-5 relative (checked at load),
and the default kernels otherwise (Intel CPUs, other devices, torch builds without
oneDNN). oneDNN's op has no backward, so a forward that records gradients (interchange
training) runs the default kernel. The file's provenance records which kernels ran
(``model_kernels``).
"""

from __future__ import annotations

import types
from typing import Any

from belieflens.errors import ParameterError
from belieflens.types import KernelName


def _onednn_forward(self: Any, x: Any) -> Any:
    """oneDNN's linear where no gradient is recorded; the default kernel where one is, since
    oneDNN's op has no autograd formula (a backward through it would silently drop the
    gradient: interchange training and steering fits backpropagate through the model)."""
    import torch

    if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad or (
            self.bias is not None and self.bias.requires_grad)):
        return torch.nn.functional.linear(x, self.weight, self.bias)
    return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")


def onednn_works(dtype: str = "float32") -> bool:
    """Whether oneDNN's linear runs here in ``dtype`` (``float32`` or ``bfloat16``) and
    matches the default kernel on a random layer (within 1e-5 relative in float32, 1e-2 in
    bfloat16). Some CPUs have no bfloat16 primitive: the op then raises, and this says no."""
    import torch

    tol = 1e-5 if dtype == "float32" else 1e-2
    try:
        if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
            return False
        gen = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(*shape, generator=gen).to(getattr(torch, dtype))
                   for shape in ((3, 5, 64), (48, 64), (48,)))
        with torch.inference_mode():
            ref = torch.nn.functional.linear(x, w, b).float()
            got = torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "").float()
        return bool(got.shape == ref.shape and
                    (got - ref).abs().max() <= tol * ref.abs().max())
    except (RuntimeError, AttributeError):
        return False


def cpu_vendor() -> str:
    """The CPU's vendor id from ``/proc/cpuinfo`` (e.g. ``GenuineIntel``, ``AuthenticAMD``);
    empty where it cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def resolve_kernels(kernels: KernelName, device: str, vendor: str | None = None,
                    dtype: str = "float32") -> KernelName:
    """The kernels ``auto`` stands for on ``device`` for a model in ``dtype`` (``vendor``: the
    CPU's, read here when None); other names are returned unchanged."""
    if kernels != "auto":
        return kernels
    if not device.startswith("cpu"):
        return "default"
    if (cpu_vendor() if vendor is None else vendor) == "GenuineIntel":
        return "default"  # MKL's tuned path: oneDNN is no faster (module docstring)
    return "onednn" if onednn_works(dtype) else "default"


def _linear_dtype(model: Any) -> str:
    """The dtype of the model's first linear layer (``float32`` when it has none)."""
    import torch

    for mod in model.modules():
        if type(mod) is torch.nn.Linear:
            return str(mod.weight.dtype).removeprefix("torch.")
    return "float32"


def use_kernels(model: Any, kernels: KernelName, device: str) -> KernelName:
    """Route the model's linear layers through ``kernels``; returns the kernels now in use.

    ``default`` changes nothing; ``auto`` resolves first (:func:`resolve_kernels`).
    ``onednn`` needs a CPU model and a torch build with oneDNN, else
    :class:`ParameterError` (one line).
    """
    dtype = _linear_dtype(model)
    if kernels == "auto":
        kernels = resolve_kernels(kernels, device, dtype=dtype)  # checked oneDNN already
    elif kernels == "onednn":
        if not device.startswith("cpu"):
            raise ParameterError(
                f"option '--kernels' = {kernels} is for --device cpu, not {device}")
        if not onednn_works(dtype):
            raise ParameterError(f"option '--kernels' = {kernels}: oneDNN's linear is not "
                                 f"available in {dtype} or disagrees with the default kernel "
                                 "here")
    if kernels == "default":
        return kernels
    import torch

    for mod in model.modules():
        if type(mod) is torch.nn.Linear and mod.weight.dtype in (torch.float32, torch.bfloat16):
            setattr(mod, "forward", types.MethodType(_onednn_forward, mod))  # noqa: B010
    return kernels
