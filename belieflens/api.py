"""The top level: one call each to load a model, extract a study, train a tuned lens and
compare models on one study.

>>> import belieflens
>>> model = belieflens.load("smollm2-135m")                          # doctest: +SKIP
>>> path = belieflens.extract("coin-flip", params={"turns": 10}, model=model,
...                           out="study.h5", episodes=4, seed=0)  # doctest: +SKIP
>>> ds = belieflens.open_cache(path)                                 # doctest: +SKIP

Keyword arguments are the command line's options with underscores (``--batch-size`` is
``batch_size``, ``--no-prefix-reuse`` is ``prefix_reuse=False``); every bad value raises
:class:`~belieflens.errors.BeliefLensError` with one line, before any heavy work. Each
``belieflens`` command is one call of this module. torch and transformers are imported only
when a model is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar, get_args

from belieflens import envs
from belieflens.episodes.base import Environment
from belieflens.errors import BeliefLensError, ModelNotFoundError, ParameterError
from belieflens.model.load import DEFAULT_MODEL, LoadedModel, ModelInfo
from belieflens.run.cluster import DaskClient
from belieflens.run.extract import ExtractOptions, Progress
from belieflens.run.generation_log import GenerationRecord
from belieflens.train.lens import TrainResult
from belieflens.types import (
    DebiasMethod,
    DeviceName,
    DTypeName,
    KernelName,
    PaddingSide,
    StoreDTypeName,
)

if TYPE_CHECKING:
    import xarray as xr

    from belieflens.lens.tuned import TunedLens
    from belieflens.report.study import Analysis

ModelLike: TypeAlias = str | os.PathLike[str] | LoadedModel
"""A model to run: an embedded name, a Hugging Face id, a model folder, a ``.gguf`` file, or a
model already loaded with :func:`load`."""

BatchSize: TypeAlias = int | Literal["auto"]
"""Rows per forward batch (>= 1), or ``auto``: fit a quarter of the machine's memory."""

C = TypeVar("C", bound=str)


def choice(option: str, value: str, allowed: Sequence[C]) -> C:
    """``value`` as one of ``allowed`` (a ``Literal`` option set), or one line naming
    ``option`` (:class:`ParameterError`)."""
    for a in allowed:
        if a == value:
            return a
    raise ParameterError(
        f"option '{option}' = {value!r} is not allowed: one of {', '.join(allowed)}"
    )


DEVICE_NAMES: tuple[DeviceName, ...] = get_args(DeviceName)
DTYPE_NAMES: tuple[DTypeName, ...] = get_args(DTypeName)
KERNEL_NAMES: tuple[KernelName, ...] = get_args(KernelName)
PADDING_SIDES: tuple[PaddingSide, ...] = get_args(PaddingSide)
STORE_DTYPE_NAMES: tuple[StoreDTypeName, ...] = get_args(StoreDTypeName)
"""The option sets of :mod:`belieflens.types` as tuples, for :func:`choice`."""


@dataclass(frozen=True)
class ModelLoaded:
    """Reported when a model has been loaded: the evaluated ``model`` or the ``simulator``
    that plays the user; ``threads`` is torch's CPU thread count after the load."""

    role: Literal["model", "simulator"]
    info: ModelInfo
    threads: int


@dataclass(frozen=True)
class PositionsCollected:
    """Reported by :func:`train_lens` once the training positions have been run."""

    positions: int
    contexts: int


ExtractEvent: TypeAlias = ModelLoaded | GenerationRecord | Progress
"""What :func:`extract` reports while it runs: each model it loads, each text generation,
and progress (:class:`~belieflens.run.extract.Progress`: rows done, tokens, resumed rows)."""

LensEvent: TypeAlias = ModelLoaded | PositionsCollected
"""What :func:`train_lens` reports while it runs."""


def _spec(model: str | os.PathLike[str]) -> str:
    return os.fspath(model)


def _resolve(model: ModelLike) -> None:
    """Fail fast on a model that cannot be found (nothing heavy is imported)."""
    if not isinstance(model, LoadedModel):
        from belieflens.model.load import resolve

        resolve(_spec(model))


def _check_threads(threads: int) -> None:
    if threads < 0:
        raise ParameterError(f"option '--threads' = {threads} is not allowed: >= 0")


def _set_threads(threads: int) -> int:
    import torch

    if threads:
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


def _load_quietly(
    spec: str, device: DeviceName, dtype: DTypeName, kernels: KernelName
) -> LoadedModel:
    """Load ``spec`` (inside :func:`~belieflens.model.load.quiet_libraries`); weights or a
    config transformers cannot read give one line (:class:`ModelNotFoundError`)."""
    from belieflens.model import load as models
    try:
        return models.load(spec, device=device, dtype=dtype, kernels=kernels)
    except BeliefLensError:
        raise
    except Exception as e:  # weights or config transformers cannot read
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ModelNotFoundError(f"model {spec!r} could not be loaded: {first}") from None


def load(
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: DeviceName = "cpu",
    dtype: DTypeName = "float32",
    kernels: KernelName = "auto",
    threads: int = 0,
) -> LoadedModel:
    """Load a model and wrap it in a TransformerLens bridge.

    ``model``: an embedded name (``smollm2-135m``, the default), a Hugging Face id in the
    local cache, a model folder or a ``.gguf`` file. ``kernels``: CPU linear kernels
    (``auto`` uses oneDNN where it passes a check at load). ``threads``: torch's CPU
    threads (0 keeps torch's setting). Raises :class:`ModelNotFoundError` (one line) for a
    model that cannot be found or read.
    """
    device = choice("--device", device, DEVICE_NAMES)
    dtype = choice("--dtype", dtype, DTYPE_NAMES)
    kernels = choice("--kernels", kernels, KERNEL_NAMES)
    _check_threads(threads)
    spec = _spec(model)
    _resolve(spec)
    from belieflens.model.load import quiet_libraries

    _set_threads(threads)
    with quiet_libraries():
        return _load_quietly(spec, device, dtype, kernels)


def _check_out(out: Path, overwrite: bool) -> None:
    """``out`` may be written: not a directory, in a writable folder, and new unless
    ``overwrite``; else one line (:class:`ParameterError`)."""
    if out.is_dir():
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it is a directory")
    if out.exists() and not overwrite:
        raise ParameterError(f"{out} exists; pass --overwrite to replace it")
    folder = out.parent
    if not folder.is_dir():
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {folder} does not exist"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {folder} is not writable"
        )


def _check_study_dir(out: Path) -> None:
    """``out`` may be a study directory: not a file, in an existing folder (one line)."""
    if out.exists() and not out.is_dir():
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: with a cluster it is a study directory, "
            "and a file of that name exists"
        )
    if not out.exists() and not out.parent.is_dir():
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {out.parent} does not exist"
        )


def _max_rows(batch_size: BatchSize) -> int:
    """``batch_size`` as :attr:`ExtractOptions.max_rows` (0 = auto)."""
    if batch_size == "auto":
        return 0
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ParameterError(
            f"option '--batch-size' = {batch_size} is not allowed: >= 1, or auto"
        )
    return batch_size


def environment(env: Environment | str, params: Mapping[str, object] | None = None) -> Environment:
    """``env`` itself, or the registered environment named ``env`` built with ``params``
    (typed values or strings, as from ``--set``)."""
    if isinstance(env, str):
        from belieflens.envs import get

        return get(env, **dict(params or {}))
    if params:
        raise ParameterError(
            "params are given with an environment that is already built: pass its name instead"
        )
    return env


def extract(
    env: Environment | str,
    *,
    out: str | os.PathLike[str],
    params: Mapping[str, object] | None = None,
    model: ModelLike = DEFAULT_MODEL,
    simulator: ModelLike | None = None,
    episodes: int = 4,
    seed: int = 0,
    device: DeviceName = "cpu",
    dtype: DTypeName = "float32",
    kernels: KernelName = "auto",
    batch_size: BatchSize = 16,
    max_tokens: int = 8192,
    row_tokens: int = 128,
    threads: int = 0,
    padding: PaddingSide = "right",
    save_logits: bool = False,
    resid_dtype: StoreDTypeName = "float32",
    cont_resid: bool = False,
    prefix_reuse: bool = True,
    window: int = 1024,
    overwrite: bool = False,
    on_event: Callable[[ExtractEvent], None] | None = None,
    client: DaskClient | str | None = None,
    shard_episodes: int = 0,
) -> Path:
    """Run every read-out of ``episodes`` episodes of an environment through a model and
    write the cache file ``out``; returns its path.

    With ``client`` (a :class:`distributed.Client`, or a ``--cluster`` value: ``local[:N]``,
    ``tcp://HOST:PORT`` or ``PATH/scheduler.json``, connected after every input is checked
    and closed at the end; see :mod:`belieflens.run.cluster`), ``out`` is a *study
    directory* written
    by the cluster's workers, one shard file of about ``shard_episodes`` episodes (rounded to
    whole windows; 0: about three shards per worker) per task, with a manifest
    (:mod:`belieflens.run.shards`); ``model`` and ``simulator`` are then names or paths
    each worker loads once, and ``env`` a registered name or an environment built from one.

    ``env`` is an environment or its registered name (built with ``params``). ``model`` and
    ``simulator`` (the model that plays the user under active engagement; default ``model``)
    are loaded here unless already loaded; ``device``, ``dtype``, ``kernels`` and
    ``threads`` apply to what is loaded here. Every input is checked, and the models are
    found, before anything heavy runs; the write lock of ``out`` is held from before the
    load to the end. If ``<out>.partial`` holds an interrupted run of the same study, it is
    resumed (:mod:`belieflens.run.resume`); a partial file of another study is refused
    unless ``overwrite``. ``on_event`` receives an :data:`ExtractEvent` for each model
    loaded, each text generation and each step of progress.
    """
    device = choice("--device", device, DEVICE_NAMES)
    dtype = choice("--dtype", dtype, DTYPE_NAMES)
    kernels = choice("--kernels", kernels, KERNEL_NAMES)
    padding = choice("--padding", padding, PADDING_SIDES)
    resid_dtype = choice("--resid-dtype", resid_dtype, STORE_DTYPE_NAMES)
    path = Path(out)
    if client is None:
        _check_out(path, overwrite)
    else:
        _check_study_dir(path)
        if shard_episodes < 0:
            raise ParameterError(
                f"option '--shard-episodes' = {shard_episodes} is not allowed: >= 1, or 0 "
                "for auto"
            )
    options = ExtractOptions(
        episodes=episodes, seed=seed, max_rows=_max_rows(batch_size), max_tokens=max_tokens,
        row_tokens=row_tokens,
        save_logits=save_logits, padding_side=padding, resid_dtype=resid_dtype,
        threads=threads, reuse_prefix=prefix_reuse, cont_resid=cont_resid, window=window,
    )
    built = environment(env, params)
    _resolve(model)
    if simulator is not None:
        _resolve(simulator)
    if client is not None:
        from belieflens.run import cluster
        connected = cluster.connect(client) if isinstance(client, str) else client
        try:
            return _extract_sharded(
                connected, built, path, options, model=model, simulator=simulator,
                device=device, dtype=dtype, kernels=kernels, threads=threads,
                overwrite=overwrite, shard_episodes=shard_episodes, on_event=on_event)
        finally:
            if isinstance(client, str):
                cluster.close(connected)
    from belieflens.model.load import quiet_libraries
    from belieflens.run import extract as cache_extract
    from belieflens.run.generate import bind_run
    from belieflens.run.generation_log import requires_generator, requires_simulator
    from belieflens.store.lock import write_lock

    def report(event: ExtractEvent) -> None:
        if on_event is not None:
            on_event(event)

    with write_lock(path), quiet_libraries():  # a second writer is refused before the load
        n_threads = _set_threads(threads)
        if isinstance(model, LoadedModel):
            loaded = model
        else:
            loaded = _load_quietly(_spec(model), device, dtype, kernels)
            report(ModelLoaded("model", loaded.info, n_threads))
        sim: LoadedModel | None = None
        if requires_generator(built) and requires_simulator(built) and simulator is not None:
            if isinstance(simulator, LoadedModel):
                sim = simulator
            elif _spec(simulator) != loaded.info.spec:
                sim = _load_quietly(_spec(simulator), device, dtype, "auto")
                report(ModelLoaded("simulator", sim.info, n_threads))
        bound, attrs = bind_run(built, loaded, simulator=sim, on_record=report)
        return cache_extract.extract(bound, loaded, path, options, on_progress=report,
                                     overwrite=overwrite, extra_attrs=dict(attrs))


def _extract_sharded(
    client: DaskClient, env: Environment, out: Path, options: ExtractOptions, *,
    model: ModelLike, simulator: ModelLike | None, device: DeviceName, dtype: DTypeName,
    kernels: KernelName, threads: int, overwrite: bool, shard_episodes: int,
    on_event: Callable[[ExtractEvent], None] | None,
) -> Path:
    """:func:`extract` on a Dask cluster into the study directory ``out``."""
    import dataclasses

    from belieflens.run.shards import ShardJob, run_study

    if isinstance(model, LoadedModel) or isinstance(simulator, LoadedModel):
        raise ParameterError(
            "with a cluster, pass the model by name or path: each worker loads it once"
        )
    _check_threads(threads)
    job = ShardJob(
        env=env.name, params=dataclasses.asdict(env.params), model=_spec(model),
        simulator=None if simulator is None else _spec(simulator), options=options,
        make_env=envs.get,
        device=device, dtype=dtype, kernels=kernels, threads=threads,
    )
    return run_study(client, job, out, shard_episodes=shard_episodes, overwrite=overwrite,
                     on_progress=on_event).directory


def train_lens(
    out: str | os.PathLike[str],
    *,
    model: ModelLike = DEFAULT_MODEL,
    envs: Sequence[str] | None = None,
    contexts: int = 32,
    per_context: int = 16,
    epochs: int = 4,
    lr: float = 2e-3,
    vocab_top: int = 256,
    seed: int = 0,
    device: DeviceName = "cpu",
    threads: int = 0,
    overwrite: bool = False,
    on_event: Callable[[LensEvent], None] | None = None,
) -> TrainResult:
    """Train a tuned lens for ``model`` on contexts the environments ``envs`` generate (default
    :data:`belieflens.lens.DEFAULT_ENVS`) and save it to the folder ``out``.

    ``contexts`` contexts are run and ``per_context`` token positions sampled from each;
    ``vocab_top`` restricts the training KL to the union of each position's top final
    tokens (0: the full vocabulary). Inputs, environment names and the model are checked
    before anything heavy runs; an existing lens in ``out`` is replaced only with
    ``overwrite``. Returns the lens with its held-out KL per layer.
    """
    from belieflens.envs import describe
    from belieflens.train.lens import TrainOptions
    from belieflens.train.lens_data import DEFAULT_ENVS

    device = choice("--device", device, DEVICE_NAMES)
    _check_threads(threads)
    if vocab_top < 0:
        raise ParameterError(f"option '--vocab-top' = {vocab_top} is not allowed: >= 0")
    folder = Path(out)
    if (folder / "config.json").exists() and not overwrite:
        raise ParameterError(f"{folder} holds a lens; pass --overwrite to replace it")
    names = list(DEFAULT_ENVS if envs is None else envs)
    for name in names:
        describe(name)  # unknown names fail here, before loading anything
    options = TrainOptions(epochs=epochs, lr=lr, vocab_top=vocab_top or None)
    _resolve(model)
    import numpy as np

    from belieflens.lens import save_tuned_lens
    from belieflens.model.load import quiet_libraries
    from belieflens.train.lens import train_tuned_lens
    from belieflens.train.lens_data import collect_positions

    n_threads = _set_threads(threads)
    if isinstance(model, LoadedModel):
        loaded = model
    else:
        with quiet_libraries():
            loaded = _load_quietly(_spec(model), device, "float32", "auto")
        if on_event is not None:
            on_event(ModelLoaded("model", loaded.info, n_threads))
    rng = np.random.default_rng(seed)
    positions = collect_positions(loaded, rng, envs=names, seed=seed, max_contexts=contexts,
                                  per_context=per_context)
    if on_event is not None:
        on_event(PositionsCollected(int(positions.resid.shape[0]), positions.n_contexts))
    result = train_tuned_lens(loaded, positions, rng, options)
    save_tuned_lens(result.lens, folder)
    return result


def compare(
    files: Sequence[str | os.PathLike[str]],
    *,
    debias: DebiasMethod = "geometric",
    probes: bool = True,
    seed: int = 0,
) -> xr.Dataset:
    """One Dataset with a ``model`` dimension over cache files (or study directories) of the
    same study extracted from different models: output TVD to the oracle per model and turn,
    lens and probe TVD on a common relative-depth grid (each model's own ``layer`` kept as a
    coordinate), the closest depth per read-out, the updating slope with its standard error,
    and position bias (:func:`belieflens.analysis.compare.compare`). Files of different
    studies are refused in one line (:class:`ParameterError`); ``belieflens compare FILE...
    --out DIR`` adds the report and figures.
    """
    from belieflens.analysis.compare import compare as run
    from belieflens.types import DEBIAS_METHODS

    return run(files, method=choice("--debias", debias, DEBIAS_METHODS), probes=probes,
               seed=seed)


def analyze(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    debias: DebiasMethod = "geometric",
    lens: str | Path | TunedLens | None = None,
    probes: bool = True,
    seed: int = 0,
    cluster: DaskClient | str | None = None,
    html: bool = True,
) -> Analysis:
    """Analyse a cache file or study directory, with its environment's own report sections
    (:func:`belieflens.report.study.analyze`): tables as ``text``, and with ``out`` the
    figures, ``report.md`` and, unless ``html=False``, the interactive page ``study.html``.
    An intervention result file gets its own report
    (:func:`belieflens.report.interventions.report`)."""
    from belieflens.report.interventions import report as intervention_report
    from belieflens.report.study import analyze as run
    from belieflens.store.results import is_result
    from belieflens.types import DEBIAS_METHODS

    method = choice("--debias", debias, DEBIAS_METHODS)
    where = None if out is None else Path(out)
    if is_result(Path(path)):
        return intervention_report(Path(path), where, method=method, html=html)
    return run(Path(path), where, method=method, lens=lens, probes=probes, seed=seed,
               client=cluster, sections=envs.sections_for, html=html)
