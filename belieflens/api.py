"""The facade: one call for each thing belieflens does, and what the command line needs.

>>> import belieflens
>>> model = belieflens.load("smollm2-135m")                          # doctest: +SKIP
>>> path = belieflens.extract("coin-flip", params={"turns": 10}, model=model,
...                           out="study.h5", episodes=4, seed=0)  # doctest: +SKIP
>>> ds = belieflens.open_cache(path)                                 # doctest: +SKIP
>>> print(belieflens.analyze(path).text)                             # doctest: +SKIP

Models: :func:`load`, :func:`models`. Studies: :func:`environments`, :func:`extract`
(options as an :class:`ExtractOptions` or as its keywords), :func:`merge`, :func:`open_cache`,
:func:`info`, :func:`verify`. Analysis: :func:`analyze`, :func:`compare`,
:func:`compare_report`, :func:`train_lens`, :func:`power` (each internal test's power on known
pairs). Teaching: :func:`teach`. Interventions:
:func:`patch`, :func:`steer`, :func:`erase`, :func:`interchange` (each :func:`intervene` with
its options record, on the read-outs a :class:`Selection` names).

Keyword arguments are the command line's options with underscores (``--batch-size`` is
``batch_size``, ``--no-prefix-reuse`` is ``prefix_reuse=False``); every bad value raises
:class:`~belieflens.errors.BeliefLensError` with one line, before any heavy work, and each
option is checked in one place (its options record, or here). Each ``belieflens`` command is
one call of this module, which is all that :mod:`belieflens.cli` imports. torch and
transformers are imported only when a model is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, Unpack

from belieflens import envs
from belieflens.episodes.base import Environment
from belieflens.episodes.params import ParamSpec, parse_assignments
from belieflens.errors import (
    BeliefLensError,
    ModelNotFoundError,
    ParameterError,
    at_least,
    choice,
)
from belieflens.heap import limit_arenas
from belieflens.interventions import (
    DEFAULT_ALPHAS,
    POSITION_SETS,
    DirectionKind,
    EraseAt,
    EraseOptions,
    InterchangeOptions,
    Pair,
    PatchOptions,
    PositionSet,
    RunKeywords,
    Selection,
    SteerAt,
    SteerOptions,
    intervene,
    parse_pair,
)
from belieflens.interventions.swaps import PAIRINGS, Pairing
from belieflens.known_pairs import PowerRun
from belieflens.model.init import Init
from belieflens.model.load import (
    DEFAULT_MODEL,
    MODEL_KINDS,
    LoadedModel,
    ModelStatus,
)
from belieflens.model.load import catalogue as models
from belieflens.report.analysis import Analysis
from belieflens.report.transfer import TransferKeywords
from belieflens.run.checkpoint import CHECKPOINT_SECONDS
from belieflens.run.cluster import DaskClient
from belieflens.run.extract import ExtractKeywords, ExtractOptions, Progress
from belieflens.run.generation_log import GenerationRecord
from belieflens.run.job import ExtractJob, Models, Runtime
from belieflens.run.lifecycle import ExtractEvent, Extraction, ModelLoaded, set_threads
from belieflens.run.signals import Stop, handled
from belieflens.store.cache import merge, open_cache
from belieflens.store.info import describe as info
from belieflens.store.info import rerun_command
from belieflens.store.verify import verify
from belieflens.train.gate_run import GateRun
from belieflens.train.lens import TrainResult
from belieflens.train.teach import Progress as TeachProgress
from belieflens.train.teach import TeachConfig, TeachResult
from belieflens.types import (
    DEBIAS_METHODS,
    DEVICES,
    DebiasMethod,
    DeviceName,
    DTypeName,
    KernelName,
)

if TYPE_CHECKING:
    import xarray as xr

    from belieflens.lens.tuned import TunedLens
    from belieflens.report.analysis import Analysis

ModelLike: TypeAlias = str | os.PathLike[str] | LoadedModel
"""A model to run: an embedded name, a Hugging Face id, a model folder, a ``.gguf`` file, or a
model already loaded with :func:`load`."""

@dataclass(frozen=True)
class PositionsCollected:
    """Reported by :func:`train_lens` once the training positions have been run."""

    positions: int
    contexts: int


LensEvent: TypeAlias = ModelLoaded | PositionsCollected
"""What :func:`train_lens` reports while it runs."""


def _spec(model: str | os.PathLike[str]) -> str:
    return os.fspath(model)


def _resolve(model: ModelLike) -> None:
    """Fail fast on a model that cannot be found (nothing heavy is imported)."""
    if not isinstance(model, LoadedModel):
        from belieflens.model.load import resolve

        resolve(_spec(model))


def load(
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: DeviceName = "cpu",
    dtype: DTypeName = "float32",
    kernels: KernelName = "auto",
    threads: int = 0,
    init: Init | str | None = None,
) -> LoadedModel:
    """Load a model and wrap it in a TransformerLens bridge.

    ``model``: an embedded name (``smollm2-135m``, the default), a Hugging Face id in the
    local cache, a model folder or a ``.gguf`` file. ``kernels``: CPU linear kernels
    (``auto`` uses oneDNN where it passes a check at load). ``threads``: torch's CPU
    threads (0 keeps torch's setting). ``init``: ``random:SEED`` or ``shuffled:SEED`` loads
    an untrained control of the model instead (:mod:`belieflens.model.init`). Raises
    :class:`ModelNotFoundError` (one line) for a model that cannot be found or read.

    Args:
        model: what to load.
        device: ``cpu``, ``cuda`` or ``auto``.
        dtype: ``float32`` (the default), ``bfloat16`` or ``float16``.
        kernels: ``auto``, ``default`` or ``onednn``.
        threads: torch's CPU threads.
        init: ``trained`` (or ``None``), ``random:SEED`` or ``shuffled:SEED``.

    Returns:
        A :class:`LoadedModel`: the bridge, its tokenizer and what was loaded (``info``).

    Examples:
        >>> model = belieflens.load("smollm2-135m")
        >>> model.info.official_id, model.info.n_layers
        ('HuggingFaceTB/SmolLM2-135M-Instruct', 30)
    """
    spec = _spec(model)
    how = Models(spec, device=device, dtype=dtype, kernels=kernels, init=Init.parse(init))
    at_least("--threads", threads, 0)
    _resolve(spec)
    from belieflens.model.load import quiet_libraries

    set_threads(threads)
    with quiet_libraries():
        return how.load(spec, init=how.init)


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
    options: ExtractOptions | None = None,
    device: DeviceName = "cpu",
    dtype: DTypeName = "float32",
    kernels: KernelName = "auto",
    overwrite: bool = False,
    on_event: Callable[[ExtractEvent], None] | None = None,
    client: DaskClient | str | None = None,
    shard_episodes: int = 0,
    checkpoint_seconds: float = CHECKPOINT_SECONDS,
    init: Init | str | None = None,
    **keywords: Unpack[ExtractKeywords],
) -> Path:
    """Run every read-out of ``episodes`` episodes of an environment through a model into
    the cache file ``out``; returns its path.

    The arguments make one :class:`~belieflens.run.job.ExtractJob`, which
    :class:`~belieflens.run.lifecycle.Extraction` runs: every input is checked, and the models
    found, before anything heavy runs; the write lock of ``out`` is held from before the load
    to the end. An interrupted run of the same study
    in ``<out>.partial`` is resumed (:mod:`belieflens.run.resume`); finished read-outs are
    saved at least every ``checkpoint_seconds`` (:mod:`belieflens.run.checkpoint`). Storage
    faults and SIGINT/SIGTERM keep what was saved and raise a one-line
    :class:`~belieflens.errors.StorageError` or :class:`~belieflens.errors.InterruptedRunError`.
    With ``client``, ``out`` is a study directory of shards (:mod:`belieflens.run.shards`).

    Args:
        env: an environment or its registered name.
        out: the cache file to write (a study directory with ``client``).
        params: the environment's parameters, typed or as strings.
        model: the model to run.
        simulator: the model that plays the user under active engagement (or ``model``).
        options: the run's options (or, not both, their keywords: ``episodes``, ``seed``,
            ``batch_size``, ... as :class:`~belieflens.run.extract.ExtractKeywords`).
        device: where a model loaded here runs.
        dtype: its dtype.
        kernels: its CPU linear kernels.
        overwrite: replace ``out``, or a partial file of another study.
        on_event: called with each :data:`ExtractEvent`.
        client: a Dask client or a ``--cluster`` value (``local[:N]``, ``tcp://HOST:PORT``,
            ``PATH/scheduler.json``); ``model`` and ``simulator`` must then be names or paths.
        shard_episodes: about this many episodes per shard (0: about three per worker).
        checkpoint_seconds: the most seconds of compute between two saves.
        init: ``random:SEED`` / ``shuffled:SEED``: an untrained control of ``model``.
        **keywords: the options as keywords.

    Returns:
        The path written. Its Dataset (:func:`open_cache`) has one row per read-out:
        ``resid[query, layer, d_model]``, ``option_logprob[query, option]``, ...

    Examples:
        With ``model = belieflens.load("smollm2-135m")`` (:func:`load`):

        >>> path = belieflens.extract("coin-flip", params={"turns": 1}, out="small.h5",
        ...                           episodes=1, seed=0, model=model)
        >>> belieflens.open_cache(path).sizes["query"]   # 2 turns x 2 deliveries x 7 rotations
        28
    """
    opts = _options(options, keywords)
    models = Models(_name(model), None if simulator is None else _name(simulator),
                    device=device, dtype=dtype, kernels=kernels, init=Init.parse(init))
    runtime = Runtime(Path(out), overwrite=overwrite, checkpoint_seconds=checkpoint_seconds,
                      cluster=client, shard_episodes=shard_episodes)
    job = ExtractJob(environment(env, params), models, runtime, opts, make_env=envs.get)
    return Extraction(job, on_event).run()


def _name(model: ModelLike) -> str | LoadedModel:
    """``model`` loaded, or by name or path."""
    return model if isinstance(model, LoadedModel) else _spec(model)


def _options(options: ExtractOptions | None, keywords: ExtractKeywords) -> ExtractOptions:
    """``options``, or the record its keywords make (one line if both are given)."""
    if options is not None and keywords:
        raise ParameterError("pass the options as an ExtractOptions or as keywords, not both")
    return options if options is not None else ExtractOptions.of(**keywords)


def _lens_model(model: ModelLike, device: DeviceName, n_threads: int,
                on_event: Callable[[LensEvent], None] | None) -> LoadedModel:
    """``model`` itself, or loaded in float32 (announced to ``on_event``)."""
    from belieflens.model.load import quiet_libraries

    if isinstance(model, LoadedModel):
        return model
    spec = _spec(model)
    with quiet_libraries():
        loaded = Models(spec, device=device).load(spec)
    if on_event is not None:
        on_event(ModelLoaded("model", loaded.info, n_threads))
    return loaded


def _check_lens_run(out: str | os.PathLike[str], envs: Sequence[str] | None,
                    device: DeviceName, threads: int, vocab_top: int,
                    overwrite: bool) -> tuple[Path, list[str]]:
    """:func:`train_lens`'s inputs checked (one line each): the lens folder and the
    environments' names."""
    from belieflens.envs import describe
    from belieflens.train.lens_data import DEFAULT_ENVS

    choice("--device", device, DEVICES)
    at_least("--threads", threads, 0)
    at_least("--vocab-top", vocab_top, 0)
    folder = Path(out)
    if (folder / "config.json").exists() and not overwrite:
        raise ParameterError(f"{folder} holds a lens; pass --overwrite to replace it")
    names = list(DEFAULT_ENVS if envs is None else envs)
    for name in names:
        describe(name)  # unknown names fail here, before loading anything
    return folder, names


def train_lens(out: str | os.PathLike[str], *, model: ModelLike = DEFAULT_MODEL,
               envs: Sequence[str] | None = None, contexts: int = 32, per_context: int = 16,
               epochs: int = 4, lr: float = 2e-3, vocab_top: int = 256, seed: int = 0,
               device: DeviceName = "cpu", threads: int = 0, overwrite: bool = False,
               on_event: Callable[[LensEvent], None] | None = None) -> TrainResult:
    """Train a tuned lens for ``model`` on contexts the environments ``envs`` generate
    (default :data:`belieflens.train.lens_data.DEFAULT_ENVS`) and save it to the folder
    ``out``; every input is checked before anything heavy runs.

    Args:
        out: the folder to save the lens to.
        model: the model whose lens it is.
        envs: environments whose contexts train it.
        contexts: contexts run.
        per_context: token positions sampled from each.
        epochs: passes over the positions.
        lr: the learning rate.
        vocab_top: tokens the training KL runs over (0: the whole vocabulary).
        seed: seeds contexts, positions and initialisation.
        device: where the model runs.
        threads: torch's CPU threads.
        overwrite: replace a lens in ``out``.
        on_event: called with each :data:`LensEvent`.

    Returns:
        A ``TrainResult``: the lens and its held-out KL per layer (dims ``layer``).

    Examples:
        Not run by the tests here (it trains for minutes on the embedded model; the tests
        of :mod:`belieflens.train` train one on a tiny model):

        >>> result = belieflens.train_lens("lens/")  # doctest: +SKIP
        >>> ds.bl.beliefs(source=result.lens).dims  # doctest: +SKIP
        ('delivery', 'probe', 'episode', 'turn', 'layer', 'outcome')
    """
    from belieflens.train.lens import TrainOptions

    folder, names = _check_lens_run(out, envs, device, threads, vocab_top, overwrite)
    options = TrainOptions(epochs=epochs, lr=lr, vocab_top=vocab_top or None)
    _resolve(model)
    import numpy as np

    from belieflens.lens import save_tuned_lens
    from belieflens.train.lens import train_tuned_lens
    from belieflens.train.lens_data import collect_positions

    loaded = _lens_model(model, device, set_threads(threads), on_event)
    rng = np.random.default_rng(seed)
    positions = collect_positions(loaded, rng, envs=names, seed=seed, max_contexts=contexts,
                                  per_context=per_context)
    if on_event is not None:
        on_event(PositionsCollected(int(positions.resid.shape[0]), positions.n_contexts))
    result = train_tuned_lens(loaded, positions, rng, options)
    save_tuned_lens(result.lens, folder)
    return result


def teach(
    env: str,
    *,
    out: str | os.PathLike[str],
    params: Mapping[str, object] | None = None,
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    episodes: int = 32,
    seed: int = 0,
    steps: int = 300,
    batch: int = 4,
    rank: int = 8,
    layers: str | Sequence[int] = "",
    lr: float = 1e-3,
    temper: float | str = 1.0,
    weigh: str = "readout",
    threads: int = 0,
    checkpoint_seconds: float = 300.0,
    on_step: Callable[[TeachProgress], None] | None = None,
    mix: Sequence[Mapping[str, object]] = (),
) -> TeachResult:
    """Teach ``model`` the environment's oracle with LoRA (:mod:`belieflens.train.teach`) and
    write the adapter folder ``out``, itself a model (``--model OUT``).

    Every input is checked first: an environment without option-level oracles, ``temper``
    <= 0 or not a number, ``layers`` outside the model, an ``out`` holding another teach run
    or an adapter over another base: one line (:class:`ParameterError`). A checkpoint of this
    run in ``out`` resumes; SIGINT or SIGTERM saves one, raising
    :class:`~belieflens.errors.InterruptedRunError`.

    Args:
        env: the environment's name.
        out: the adapter folder.
        params: the environment's parameters (typed or as strings, as from ``--set``).
        model: the base model (an embedded name or a model folder).
        episodes: training episodes (seeds disjoint from any evaluation seed).
        seed: seeds the episodes, the adapters' initial weights and the order of steps.
        steps: optimiser steps.
        batch: read-out trees (one ``(episode, delivery, turn)`` each) per step.
        rank: LoRA's rank (its scale ``alpha`` is twice the rank).
        layers: the adapted blocks (``22-29``, ``3,5,7``, a sequence; empty: the last quarter).
        lr: Adam's learning rate.
        temper: the weight of the evidence in the target (1: the oracle).
        weigh: each read-out's weight in the loss: ``"readout"`` (1 each) or ``"question"``
            (each belief question of a tree the same, however many rotations render it).
        threads: torch's CPU threads (0: keep).
        checkpoint_seconds: the most seconds of training between two checkpoints.
        on_step: called after each step with its :class:`~belieflens.train.teach.Progress`.
        mix: conditions taught together, each parameters over ``params`` (``episodes``
            episodes of each, each at its own training seed); empty: ``params`` alone.

    Returns:
        A ``TeachResult``: the folder and its ``teach.json`` record.

    Examples:
        Not run here (minutes on the embedded model):

        >>> result = belieflens.teach("coin-flip", out="bayes/")  # doctest: +SKIP
        >>> model = belieflens.load("bayes/")  # doctest: +SKIP
    """
    from belieflens.model.load import quiet_libraries
    from belieflens.train.teach import teach as run_teach

    config = _teach_config(env, params, _spec(model), layers, temper, episodes=episodes,
                           seed=seed, steps=steps, batch=batch, rank=rank, lr=lr,
                           weigh=weigh, threads=threads, mix=mix)
    with quiet_libraries():
        return run_teach(config, out, threads=threads, checkpoint_seconds=checkpoint_seconds,
                         on_step=on_step)


def _typed(env: str, given: Mapping[str, object]) -> dict[str, object]:
    """``given`` parameters as the environment types them (one line if one is bad)."""
    built = environment(env, dict(given))
    return {k: getattr(built.params, k) for k in given}


def _teach_config(env: str, params: Mapping[str, object] | None, model: str,
                  layers: str | Sequence[int], temper: float | str, *, episodes: int,
                  seed: int, steps: int, batch: int, rank: int, lr: float, weigh: str,
                  threads: int, mix: Sequence[Mapping[str, object]] = ()) -> TeachConfig:
    """The record of a teach run, each input (``threads`` too) checked and the model found
    (one line otherwise) before anything is written."""
    from belieflens.train.teach import parse_layers, parse_temper

    at_least("--threads", threads, 0)
    given = dict(params or {})
    typed = _typed(env, given)
    conditions = tuple(_typed(env, {**given, **c}) for c in mix)
    config = TeachConfig(
        env=env, env_params=tuple(typed.items()), model=model, episodes=episodes,
        seed=seed, steps=steps, batch=batch, rank=rank, alpha=2.0 * rank,
        layers=parse_layers(layers) if isinstance(layers, str) else tuple(layers), lr=lr,
        temper=parse_temper(temper), weigh=weigh,  # type: ignore[arg-type]  # checked there
        mix=tuple(tuple((k, c[k]) for k in m) for c, m in zip(conditions, mix, strict=True)))
    _resolve(config.model)
    return config


def gates(
    file: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str],
    threads: int = 1,
    on_progress: Callable[[str], None] | None = None,
    results: str | None = None,
) -> GateRun:
    """Run a pre-registered gate file (:mod:`belieflens.train.gates`): check that it is frozen
    in git and that its adapters are the ones frozen, read every model on every held-out
    condition (extracted into ``out``; files there are reused), leave out the read-outs whose
    prompt a taught model saw, and measure and judge each model.

    Bad input (a gate file that is not committed, was edited after its freeze commit, names
    an unknown model or measure; an adapter taught again since; a condition with nothing held
    out) is one line (:class:`ParameterError`) before anything heavy runs.

    Args:
        file: the gate file (TOML).
        out: the folder of its studies, ``measures.nc`` and ``verdicts.json``.
        threads: torch's CPU threads.
        on_progress: called with each ``"MODEL on CONDITION"`` as it starts.
        results: write the measures to ``docs/results/NAME.md`` and the verdicts to
            ``NAME-verdicts.md`` (:mod:`belieflens.results`).

    Returns:
        A :class:`~belieflens.train.gate_run.GateRun`: the freeze commit, the measures (dims
        ``model``, ``condition``, ``delivery``) and every verdict.

    Examples:
        Not run here (about an hour on two CPU cores for the shipped gate file):

        >>> run = belieflens.gates("gates/teach.toml", out="runs/gates")  # doctest: +SKIP
        >>> run.met  # doctest: +SKIP
    """
    from belieflens.model.load import quiet_libraries
    from belieflens.train.gate_run import run_gates

    at_least("--threads", threads, 1)

    def load_model(spec: str) -> LoadedModel:
        with quiet_libraries():
            return Models(spec).load(spec)

    from belieflens import results as written

    recorder = written.start(threads=threads) if results else None
    run = run_gates(file, out, threads=threads, load=load_model, on_progress=on_progress)
    if recorder is not None and results:
        note = f"gate file {Path(file).name}, frozen at commit {run.commit[:12]} ({run.date})"
        recorder.write(results, run.MEASURE_COLUMNS, run.measure_rows(), note=note)
        recorder.write(f"{results}-verdicts", run.VERDICT_COLUMNS, run.verdict_rows(),
                       note=note + ("; every gate met" if run.met else "; a gate is NOT met"))
    return run


def compare(
    files: Sequence[str | os.PathLike[str]],
    *,
    debias: DebiasMethod = "geometric",
    decoders: bool = True,
    seed: int = 0,
) -> xr.Dataset:
    """One Dataset with a ``model`` dimension over cache files (or study directories) of the
    same study extracted from different models: output TVD to the oracle per model and turn,
    lens and decoder TVD on a common relative-depth grid (each model's own ``layer`` kept as a
    coordinate), the closest depth per read-out, the updating slope with its standard error,
    and position bias (:func:`belieflens.analysis.compare.compare`). Files of different
    studies are refused in one line (:class:`ParameterError`); :func:`compare_report` adds
    the report and figures.

    Args:
        files: cache files (or study directories), one per model.
        debias: how rotations are pooled.
        decoders: fit the linear decoders (their columns are NaN without).
        seed: seeds the decoders' folds.

    Returns:
        Variables such as ``output_tvd_mean`` (dims ``model, delivery, probe, turn``),
        ``tvd_mean`` (``model, delivery, probe, turn, depth, source``), ``layer``
        (``model, depth``), ``slope`` and ``slope_se`` (``model, delivery, probe``).

    Examples:
        Not run by the tests here (it needs one study extracted from two or more models;
        ``tests/analysis/test_compare.py`` compares two tiny models):

        >>> cmp = belieflens.compare(["smollm2.h5", "qwen.h5"])  # doctest: +SKIP
        >>> cmp["slope"].dims  # doctest: +SKIP
        ('model', 'delivery', 'probe')
    """
    from belieflens.analysis.compare import compare as run

    return run(files, method=choice("--debias", debias, DEBIAS_METHODS), decoders=decoders,
               seed=seed, control_of=envs.positive_control)


def compare_report(
    files: Sequence[str | os.PathLike[str]],
    out: str | Path | None = None,
    *,
    debias: DebiasMethod = "geometric",
    decoders: bool = True,
    seed: int = 0,
) -> Analysis:
    """``belieflens compare``: :func:`compare` as text tables; with ``out`` (a folder), also
    its figures, ``compare.md``, the Dataset as ``compare.nc`` and the page ``compare.html``
    (:func:`belieflens.report.compare.compare_report`).

    Args:
        files: cache files (or study directories), one per model.
        out: a folder for the figures, ``compare.md`` and ``compare.nc`` (``None``: tables
            only).
        debias: how rotations are pooled.
        decoders: fit the linear decoders (their columns are NaN without).
        seed: seeds the decoders' folds.

    Returns:
        An ``Analysis``: its ``text`` is the tables ``belieflens compare`` prints, its
        ``files`` what was written.

    Examples:
        Not run by the tests here (it needs one study extracted from two or more models;
        ``tests/analysis/test_compare.py`` compares two tiny models):

        >>> result = belieflens.compare_report(["smollm2.h5", "qwen.h5"], "cmp/")  # doctest: +SKIP
        >>> print(result.text)  # doctest: +SKIP
    """
    from belieflens.report.compare import compare_report as run

    return run(files, out, method=choice("--debias", debias, DEBIAS_METHODS), decoders=decoders,
               seed=seed, control_of=envs.positive_control)


def analyze(
    file: str | Path,
    out: str | Path | None = None,
    *,
    debias: DebiasMethod = "geometric",
    lens: str | Path | TunedLens | None = None,
    decoders: bool = True,
    seed: int = 0,
    client: DaskClient | str | None = None,
    html: bool = True,
    floors: Sequence[str | os.PathLike[str]] = (),
    **more: Unpack[TransferKeywords],
) -> Analysis:
    """Belief tables of a cache file or study directory (``text``); with ``out`` (a folder),
    plots and a Markdown report too, with the file's environment's own sections
    (:func:`belieflens.report.analysis.analyze`: ``lens`` is ``tuned:DIR``, a lens folder or a
    loaded lens, ``decoders=False`` skips the linear decoders, ``client`` runs the dask work on a
    cluster). An intervention result file gets its own report
    (:func:`belieflens.report.interventions.report`).

    Args:
        file: a cache file, study directory or intervention result file.
        out: a folder for the figures and ``report.md`` (``None``: tables only).
        debias: how rotations are pooled.
        lens: a tuned lens for the ``tuned-lens`` column.
        decoders: fit the linear decoders.
        seed: seeds the decoders' folds.
        client: a Dask client or a ``--cluster`` value.
        html: with ``out``, also write the interactive page (``study.html``, or
            ``intervention.html`` for a result file).
        floors: control files of the same study (``extract --init random:SEED``, two or
            more): every lens, decoder and geometry read-out beside its floor and its
            statistic baselines, with the selectivity and its interval over episodes and
            seeds, corrected across layers (:mod:`belieflens.analysis.floor`). Every
            decoder result stands beside the statistic baselines the file's environment
            declares (``belieflens.envs.statistic_features``), floors or not.
        **more: ``transfers``, ``transfer_floors``, ``transfer_delivery``, ``own_answer``:
            the decoders a bag of tokens cannot pass; ``results``: the results file
            (:class:`~belieflens.report.transfer.TransferKeywords`).

    Returns:
        An ``Analysis``: its ``text`` is the tables ``belieflens analyze`` prints.

    Examples:
        >>> result = belieflens.analyze("study.h5", decoders=False)
        >>> "next-flip" in result.text
        True
    """
    from belieflens.report.analysis import analyze as run
    from belieflens.report.interventions import report
    from belieflens.report.transfer import analyze_more
    from belieflens.store.results import is_result

    method = choice("--debias", debias, DEBIAS_METHODS)
    if is_result(file):
        return report(file, out, method=method, html=html)
    return run(file, out, method=method, lens=lens, decoders=decoders, seed=seed,
               client=client, sections=envs.sections_for, html=html,
               floors=[Path(f) for f in floors], targets=envs.readout_targets,
               statistics=envs.statistic_features, **analyze_more(more))


def power(
    pairs: Sequence[Sequence[str | os.PathLike[str]]],
    out: str | os.PathLike[str],
    *,
    tests: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
    select: Selection | None = None,
    steps: int = 200,
    debias: DebiasMethod = "geometric",
    seed: int = 0,
    results: str | None = None,
    record: bool = False,
    on_progress: Callable[[str], None] | None = None,
) -> PowerRun:
    """``belieflens power``: every internal test on known pairs, each test's power
    (:mod:`belieflens.known_pairs`, :mod:`belieflens.analysis.power`).

    Args:
        pairs: each known pair's study files, the network known to hold the belief first
            (a trained toy, then untrained networks of its shape; or a taught adapter, then
            its base).
        out: the folder of the intervention results (made where missing, reused where
            there) and ``power.nc``.
        tests: the tests to run (default: every registered one, and the geometry of each
            target the study's environment defines; ``geometry`` names them all).
        layers: the layers the interventions edit (default: all).
        select: the read-outs the interventions run on (default: all).
        steps: the interchange subspace's training steps.
        debias: how rotations are pooled.
        seed: seeds the folds, the interventions and the bootstrap.
        results: also write ``docs/results/NAME.md`` and ``.json``.
        record: also update the shipped power record the reports' marks read
            (:mod:`belieflens.analysis.power_record`).
        on_progress: told each intervention run and each test read.

    Returns:
        A ``PowerRun``: the Dataset over ``(test, pair, layer)``, its text, the files written.

    Examples:
        Not run here (the studies come from ``extract``, the untrained ones with ``--init``):

        >>> run = belieflens.power([["toy.h5", "r0.h5", "r1.h5"]], "power/")  # doctest: +SKIP
        >>> run.dataset["separates"].dims                                      # doctest: +SKIP
        ('test', 'pair', 'layer')
    """
    from belieflens import results as recorded
    from belieflens.known_pairs import Recipe, written
    from belieflens.known_pairs import power as run

    recorder = recorded.start() if results else None
    if layers is not None and not layers:
        raise ParameterError("option '--layers' is empty")
    at_least("--steps", steps, 1)
    recipe = Recipe(layers=tuple(layers) if layers is not None else None,
                    select=select or Selection(), steps=steps, seed=seed)
    ds = run(pairs, out, tests=tests, recipe=recipe,
             method=choice("--debias", debias, DEBIAS_METHODS), seed=seed,
             targets=envs.readout_targets, load=load, on_progress=on_progress)
    return written(ds, Path(out), results=results, record=record, recorder=recorder)


@dataclass(frozen=True)
class EnvironmentInfo:
    """One registered environment as ``belieflens envs`` lists it."""

    name: str
    doc: str
    """Its one-paragraph summary."""
    params: tuple[ParamSpec, ...]
    """Its parameters, with their types, defaults and help."""
    counts: str | None
    """The prompt counts of its grid at the default parameters (``None``: no grid)."""


def environments() -> list[EnvironmentInfo]:
    """Every registered environment, with its parameters (what ``belieflens envs`` lists).

    Returns:
        One :class:`EnvironmentInfo` per environment: name, summary, parameters, grid counts.

    Examples:
        >>> [e.name for e in belieflens.environments()][:3]
        ['belief-attribution', 'coin-flip', 'dutch-book']
        >>> [p.name for p in belieflens.environments()[1].params][:3]
        ['a0', 'b0', 'theta']
    """
    out = []
    for name in envs.names():
        doc, params = envs.describe(name)
        out.append(EnvironmentInfo(name, doc, tuple(params), envs.grid_counts(name)))
    return out


def patch(
    study: str | os.PathLike[str], *, out: str | os.PathLike[str],
    options: PatchOptions | None = None, **run: Unpack[RunKeywords],
) -> Path:
    """Interchange patching (:mod:`belieflens.interventions.patch`): each base read-out with its
    source's residual stream patched in, per layer and position set; writes ``out``. The
    pairs are ``options.pairs``, else the aligned pairs of probe instances among the read-outs
    ``select`` names; the other keywords are :func:`intervene`'s.

    Args:
        study: the study's cache file.
        out: the result file to write.
        options: layers, position sets, pairs.
        **run: ``model``, ``select`` (a :class:`Selection`), ``device``, ``overwrite``, ...

    Returns:
        The path written: ``patched_logprob[pair, layer, positions, option]`` with the clean
        ``base_logprob`` and ``source_logprob[pair, option]``.

    Examples:
        With ``model = belieflens.load("smollm2-135m")`` (:func:`load`):

        >>> out = belieflens.patch("study.h5", out="patch.h5", model=model,
        ...                        options=belieflens.PatchOptions(layers=(30,),
        ...                                                        positions=("answer",)),
        ...                        select=belieflens.Selection(turns=(1,), probes=("next-flip",)))
        >>> import xarray as xr
        >>> xr.open_dataset(out, engine="h5netcdf")["patched_logprob"].dims
        ('pair', 'layer', 'positions', 'option')
    """
    return intervene(study, options or PatchOptions(), out=out, **run)


def steer(
    study: str | os.PathLike[str], *, out: str | os.PathLike[str],
    options: SteerOptions | None = None, **run: Unpack[RunKeywords],
) -> Path:
    """Steering (:mod:`belieflens.interventions.steer`): alpha times the concept's direction
    (the ridge decoder's or the difference of means, cross-fitted by episode) added per layer,
    against a random direction of equal norm; writes ``out``. The
    keywords (``model``, ``select``, ...) are :func:`intervene`'s.

    Args:
        study: the study's cache file.
        out: the result file to write.
        options: layers, strengths (``alphas``), folds of the decoder, positions.
        **run: ``model``, ``select`` (a :class:`Selection`), ``device``, ``overwrite``, ...

    Returns:
        The path written: ``steered_logprob`` and ``control_logprob[query, layer, alpha,
        option]``.

    Examples:
        With ``model = belieflens.load("smollm2-135m")`` (:func:`load`):

        >>> out = belieflens.steer("study.h5", out="steer.h5", model=model,
        ...                        options=belieflens.SteerOptions(layers=(15,), alphas=(0.0, 2.0),
        ...                                                        n_folds=2),
        ...                        select=belieflens.Selection(turns=(1, 2), probes=("next-flip",),
        ...                                                    deliveries=("multi-turn",)))
        >>> import xarray as xr
        >>> xr.open_dataset(out, engine="h5netcdf")["steered_logprob"].dims
        ('query', 'layer', 'alpha', 'option')
    """
    return intervene(study, options or SteerOptions(), out=out, **run)


def erase(
    study: str | os.PathLike[str], *, out: str | os.PathLike[str],
    options: EraseOptions | None = None, **run: Unpack[RunKeywords],
) -> Path:
    """Erasure (:mod:`belieflens.interventions.erase`): LEACE of the oracle concept per layer,
    cross-fitted by episode, against a random subspace of equal rank; writes ``out``. The
    keywords (``model``, ``select``, ...) are :func:`intervene`'s.

    Args:
        study: the study's cache file.
        out: the result file to write.
        options: layers, folds, positions.
        **run: ``model``, ``select`` (a :class:`Selection`), ``device``, ``overwrite``, ...

    Returns:
        The path written: ``erased_logprob`` and ``control_logprob[query, layer, option]``.

    Examples:
        With ``model = belieflens.load("smollm2-135m")`` (:func:`load`):

        >>> out = belieflens.erase("study.h5", out="erase.h5", model=model,
        ...                        options=belieflens.EraseOptions(layers=(15,), n_folds=2),
        ...                        select=belieflens.Selection(turns=(1,), probes=("next-flip",)))
        >>> import xarray as xr
        >>> xr.open_dataset(out, engine="h5netcdf")["erased_logprob"].dims
        ('query', 'layer', 'option')
    """
    return intervene(study, options or EraseOptions(), out=out, **run)


def interchange(
    study: str | os.PathLike[str], *, out: str | os.PathLike[str],
    options: InterchangeOptions | None = None, **run: Unpack[RunKeywords],
) -> Path:
    """Interchange on a learned subspace (:mod:`belieflens.interventions.interchange`): per
    layer a rank-k subspace at the answer position learned by interchange on training
    episodes, swapped from source to base on held-out pairs, beside random subspaces of that
    rank and the same procedure on untrained networks; writes ``out``. The keywords
    (``model``, ``select``, ...) are :func:`intervene`'s.

    Args:
        study: the study's cache file.
        out: the result file to write.
        options: layers, rank, training recipe, held-out share, floors.
        **run: ``model``, ``select`` (a :class:`Selection`), ``device``, ``overwrite``, ...

    Returns:
        The path written: ``swapped_logprob[model, pair, layer, option]`` beside
        ``control_logprob[model, pair, layer, draw, option]``.

    Examples:
        On a study of the token process ``rrxor`` by the shipped toy trained on it:

        >>> study = belieflens.extract("rrxor", model="rrxor-toy", episodes=16, seed=0,
        ...                            out="rrxor.h5")
        >>> out = belieflens.interchange(study, out="interchange.h5",
        ...                              options=belieflens.InterchangeOptions(
        ...                                  layers=(4,), rank=1, steps=20))
        >>> import xarray as xr
        >>> xr.open_dataset(out, engine="h5netcdf")["swapped_logprob"].dims
        ('model', 'pair', 'layer', 'option')
    """
    return intervene(study, options or InterchangeOptions(), out=out, **run)


def signals_handled() -> AbstractContextManager[Stop]:
    """SIGINT and SIGTERM handled for a block, as every CLI command runs: a signal raises
    :class:`~belieflens.errors.InterruptedRunError` (a run that saves as it goes finishes its
    batch first), where the default handler would end the process without a word."""
    return handled()


__all__ = [
    "DEFAULT_ALPHAS",
    "DEFAULT_MODEL",
    "MODEL_KINDS",
    "PAIRINGS",
    "POSITION_SETS",
    "Analysis",
    "BeliefLensError",
    "DirectionKind",
    "EnvironmentInfo",
    "EraseAt",
    "EraseOptions",
    "ExtractEvent",
    "ExtractKeywords",
    "ExtractOptions",
    "GenerationRecord",
    "InterchangeOptions",
    "LensEvent",
    "LoadedModel",
    "ModelLike",
    "ModelLoaded",
    "ModelNotFoundError",
    "ModelStatus",
    "Pair",
    "Pairing",
    "PatchOptions",
    "PositionSet",
    "PositionsCollected",
    "PowerRun",
    "Progress",
    "RunKeywords",
    "Selection",
    "SteerAt",
    "SteerOptions",
    "TeachProgress",
    "TeachResult",
    "TrainResult",
    "analyze",
    "compare",
    "compare_report",
    "environment",
    "environments",
    "erase",
    "extract",
    "info",
    "interchange",
    "intervene",
    "limit_arenas",
    "load",
    "merge",
    "models",
    "open_cache",
    "parse_assignments",
    "parse_pair",
    "patch",
    "power",
    "rerun_command",
    "steer",
    "teach",
    "train_lens",
    "verify",
]

