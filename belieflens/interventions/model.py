"""The model an intervention runs: the study's own, loaded unless given loaded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from belieflens.errors import BeliefLensError, ModelNotFoundError, ParameterError
from belieflens.interventions.readouts import StudyReadouts
from belieflens.model.load import LoadedModel, load, quiet_libraries, resolve
from belieflens.types import DeviceName, KernelName

KERNELS: tuple[KernelName, ...] = get_args(KernelName)


def _kernels(study: StudyReadouts) -> KernelName:
    """The study's CPU kernels (``default`` where it names none this version knows)."""
    named = str(study.attrs.get("model_kernels", "default"))
    for k in KERNELS:
        if k == named:
            return k
    return "default"


def _init(study: StudyReadouts) -> str:
    """The study's model weights: ``trained``, or the control (``random:SEED``,
    ``shuffled:SEED``) its provenance records, rebuilt the same."""
    kind = str(study.attrs.get("model_init", "trained"))
    if kind == "trained":
        return kind
    return f"{kind}:{int(study.attrs.get('model_init_seed', 0))}"


def model_for(model: LoadedModel | str | None, study: StudyReadouts, *,
              device: DeviceName = "cpu") -> LoadedModel:
    """``model`` itself, or the model spec loaded (``None``: the study's ``model_spec``, as
    trained or as the untrained control its provenance records) in float32 with the CPU
    kernels the study ran with (``model_kernels``); one line if it cannot be found or
    read."""
    if isinstance(model, LoadedModel):
        return model
    spec = model if model is not None else str(study.attrs.get("model_spec", ""))
    if not spec:
        raise ParameterError(f"{study.path} names no model (model_spec): pass --model")
    resolve(spec)
    init = None if model is not None else _init(study)
    with quiet_libraries():
        try:
            return load(spec, device=device, dtype="float32", kernels=_kernels(study),
                        init=init)
        except BeliefLensError:
            raise
        except Exception as e:  # weights or config transformers cannot read
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ModelNotFoundError(f"model {spec!r} could not be loaded: {first}") from None


def untrained_model(model: LoadedModel, init: str) -> LoadedModel:
    """``model``'s network rebuilt untrained (``random:SEED``, ``shuffled:SEED``: the
    controls of ``extract --init``), on its device and kernels, in float32."""
    info = model.info
    device: DeviceName = "cpu" if info.device == "cpu" else "auto"
    with quiet_libraries():
        return load(info.spec, device=device, dtype="float32", kernels=info.kernels, init=init)


def check_untrained(specs: Sequence[str]) -> None:
    """Refuse (one line) an ``--untrained`` that names no untrained network."""
    from belieflens.model.init import Init

    for spec in specs:
        if Init.parse(spec).trained:
            raise ParameterError(f"option '--untrained' = {spec!r} is not allowed: an "
                                 "untrained network, random:SEED or shuffled:SEED")


def layer_list(layers: Sequence[int] | None, n_layers: int) -> tuple[int, ...]:
    """``layers`` checked against ``0..n_layers`` (``None``: all of them)."""
    if layers is None:
        return tuple(range(n_layers + 1))
    for la in layers:
        if not 0 <= la <= n_layers:
            raise ParameterError(
                f"option '--layers' = {la} is not allowed: a layer in 0..{n_layers}"
            )
    return tuple(sorted(set(layers)))
