"""What one extraction is: the environment, its models, its options and where it runs.

An :class:`ExtractJob` is the whole record of a run of ``belieflens extract``: the
environment (built), the :class:`Models` and how they load, the
:class:`~belieflens.run.extract.ExtractOptions` of the study, and the :class:`Runtime` (the
output, how often it saves, a cluster). Every field is checked when its record is made, once,
with one line naming its command-line option (:class:`~belieflens.errors.ParameterError`);
what needs the file system or the model files (:meth:`ExtractJob.check`) is checked before
anything heavy runs. :class:`belieflens.run.lifecycle.Extraction` runs a job.

The command line's ``extract`` options are these records' fields, by the same names
(``tests/cli/test_extract_options.py`` holds them to it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from belieflens.episodes.base import Environment
from belieflens.errors import BeliefLensError, ModelNotFoundError, ParameterError, at_least, choice
from belieflens.model.init import TRAINED, Init
from belieflens.model.load import LoadedModel
from belieflens.run.checkpoint import CHECKPOINT_SECONDS
from belieflens.run.cluster import DaskClient
from belieflens.run.extract import ExtractOptions
from belieflens.types import DEVICES, DTYPES, DeviceName, DTypeName, KernelName

KERNEL_NAMES: tuple[KernelName, ...] = get_args(KernelName)
"""The CPU linear kernels ``--kernels`` takes."""


@dataclass(frozen=True)
class Models:
    """The models of an extraction and how those not loaded yet are loaded.

    ``model`` and ``simulator`` are a loaded model, or a name or path (an embedded name, a
    Hugging Face id in the local cache, a model folder, a ``.gguf`` file) loaded with
    ``device``, ``dtype`` and ``kernels``. ``init`` is the evaluated model's weights:
    trained, or an untrained control built at load (the simulator is always trained).
    """

    model: str | LoadedModel
    simulator: str | LoadedModel | None = None
    """The model that plays the user under active engagement (``None``: ``model``)."""
    device: DeviceName = "cpu"
    dtype: DTypeName = "float32"
    kernels: KernelName = "auto"
    init: Init = TRAINED

    def __post_init__(self) -> None:
        choice("--device", self.device, DEVICES)
        choice("--dtype", self.dtype, DTYPES)
        choice("--kernels", self.kernels, KERNEL_NAMES)
        if not self.init.trained and isinstance(self.model, LoadedModel):
            raise ParameterError(
                f"option '--init' = '{self.init}' is not allowed with a model already loaded: "
                "pass the model by name or path, or load it with belieflens.load(..., init=...)")

    def names(self) -> tuple[str, str | None]:
        """The model and the simulator by name or path, as a cluster's workers load them; one
        line if one is loaded already."""
        model, simulator = self.model, self.simulator
        if isinstance(model, LoadedModel) or isinstance(simulator, LoadedModel):
            raise ParameterError(
                "with a cluster, pass the model by name or path: each worker loads it once")
        return model, simulator

    def find(self) -> None:
        """Each model not loaded found (nothing heavy imported), and a taught adapter not
        asked for an untrained control; else one line."""
        from belieflens.model.load import refuse_adapter_init, resolve

        for m in (self.model, self.simulator):
            if isinstance(m, str):
                resolve(m)
        if isinstance(self.model, str) and self.adapter_info() is not None:
            refuse_adapter_init(self.model, self.init)

    def adapter_info(self) -> dict[str, Any] | None:
        """The teach record of ``model`` when it is a taught adapter, named or loaded
        (``None`` otherwise)."""
        from belieflens.model.load import read_adapter_info, resolve

        spec = self.model.info.spec if isinstance(self.model, LoadedModel) else self.model
        if isinstance(self.model, LoadedModel) and self.model.info.source != "adapter":
            return None
        source = resolve(spec)
        return read_adapter_info(source.path) if source.kind == "adapter" else None

    def check_heldout(self, env: Environment, seed: int) -> None:
        """One line if ``model`` is a taught adapter (by name or loaded) and ``seed`` is the
        seed of the training episodes of one of its conditions of ``env``, whatever the other
        parameters (most of the coin flip's variants relabel the same flips): its evaluation
        would not be held out."""
        info = self.adapter_info()
        if info is None or info.get("env") != getattr(env, "name", None):
            return
        conditions = info.get("conditions") or [
            {"seed": dict(info.get("training_episodes", {})).get("seed"),
             "params": info.get("env_params", {})}]
        for c in conditions:
            if c.get("seed") == seed:
                spec = self.model.info.spec if isinstance(self.model, LoadedModel) else \
                    self.model
                given = ", ".join(f"{k}={v}" for k, v in sorted(dict(c.get("params", {}))
                                                                 .items()))
                raise ParameterError(
                    f"option '--seed' = {seed} is not allowed: {spec} was taught on the "
                    f"episodes of that seed ({given}); evaluate on another")

    def load(self, spec: str, *, init: Init = TRAINED, kernels: KernelName | None = None,
             where: str = "") -> LoadedModel:
        """Load ``spec`` with these settings (``kernels`` overrides theirs), as trained or as
        the control ``init``. Weights or a config transformers cannot read, or a control it
        cannot build, give one line (:class:`ModelNotFoundError`; ``where`` says where, e.g.
        ``" on a worker"``). Call inside :func:`~belieflens.model.load.quiet_libraries`."""
        from belieflens.model import load as loader

        try:
            return loader.load(spec, device=self.device, dtype=self.dtype,
                               kernels=kernels or self.kernels, init=init)
        except BeliefLensError:
            raise
        except Exception as e:  # weights, a config or a control transformers cannot read
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            what = "" if init.trained else f" as {init}"
            raise ModelNotFoundError(
                f"model {spec!r} could not be loaded{what}{where}: {first}") from None


@dataclass(frozen=True)
class Runtime:
    """Where an extraction writes and how it runs: none of it is part of the study."""

    out: Path
    """The cache file to write; with a ``cluster``, the study directory of its shards."""
    overwrite: bool = False
    """Replace ``out``, or a partial file (or shards) of another study."""
    checkpoint_seconds: float = CHECKPOINT_SECONDS
    """The most seconds of compute between two saves of finished read-outs."""
    cluster: DaskClient | str | None = None
    """A Dask client or a ``--cluster`` value (``local[:N]``, ``tcp://HOST:PORT``,
    ``PATH/scheduler.json``); ``None``: this process."""
    shard_episodes: int = 0
    """With a cluster: about this many episodes per shard (0: about three per worker)."""

    def __post_init__(self) -> None:
        at_least("--checkpoint-seconds", self.checkpoint_seconds, 0)
        at_least("--shard-episodes", self.shard_episodes, 0, ">= 1, or 0 for auto")

    def check(self) -> None:
        """``out`` may be written (one line, :class:`ParameterError`, otherwise)."""
        if self.cluster is None:
            check_file(self.out, self.overwrite)
        else:
            check_directory(self.out)


def check_file(out: Path, overwrite: bool) -> None:
    """``out`` may be written as a cache file: not a directory, in a writable folder, and new
    unless ``overwrite``; else one line (:class:`ParameterError`)."""
    if out.is_dir():
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it is a directory")
    if out.exists() and not overwrite:
        raise ParameterError(f"{out} exists; pass --overwrite to replace it")
    _check_folder(out)
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {out.parent} is not writable"
        )


def check_directory(out: Path) -> None:
    """``out`` may be a study directory: not a file, and in an existing folder (one line)."""
    if out.exists() and not out.is_dir():
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: with a cluster it is a study directory, "
            "and a file of that name exists"
        )
    if not out.exists():
        _check_folder(out)
    elif not os.access(out, os.W_OK | os.X_OK):
        raise ParameterError(f"option '--out' = '{out}' is not allowed: not writable")


def _check_folder(out: Path) -> None:
    if not out.parent.is_dir():
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {out.parent} does not exist"
        )


@dataclass(frozen=True)
class ExtractJob:
    """One extraction: the environment, its models, the study's options and the runtime."""

    env: Environment
    """The environment, built (with its parameters)."""
    models: Models
    runtime: Runtime
    options: ExtractOptions = field(default_factory=ExtractOptions)
    make_env: Callable[..., Environment] | None = None
    """Builds the environment again from its name and parameters (e.g.
    :func:`belieflens.envs.get`, a module-level function so a worker's job pickles): what a
    cluster's workers run from."""

    def __post_init__(self) -> None:
        if self.runtime.cluster is None:
            return
        self.models.names()
        self.env_factory()

    def env_factory(self) -> Callable[..., Environment]:
        """:attr:`make_env`; one line if the job has none (a cluster needs it)."""
        if self.make_env is None:
            raise ParameterError("with a cluster, the environment is built again on each "
                                 "worker: pass it by name")
        return self.make_env

    def check(self) -> None:
        """What needs the file system: the models found, not taught on these episodes, and
        ``out`` writable (one line each), before anything heavy runs."""
        self.models.find()
        self.runtime.check()
        self.models.check_heldout(self.env, self.options.seed)
