"""Sharded extraction on Dask distributed: a study directory of standalone shard files.

A study is cut into shards of whole *windows* (the resume unit, ``--window`` queries: the
span whose batches and shared prefixes are computed together). Each shard is written by
:func:`belieflens.run.extract.write_rows` with ``rows=(start, stop)``: the shard renders and
sizes the whole study exactly as one process would (every episode is a function of
``(seed, episode)`` alone, see :mod:`belieflens.envs`), then runs only its own windows,
with the usual crash-safe partial file and resume. Because each window is batched exactly
as in the single-process run, the shards concatenated along ``query`` equal the file one
process writes, bit for bit on CPU. Shard boundaries are window boundaries, not episode
boundaries: a window may cut an episode, which then spans two shards.

Dask does all scheduling. :func:`run_study` (the driving process) submits one planning task,
then one task per unfinished shard, and keeps the manifest (:mod:`belieflens.store.manifest`).
Each worker process loads a model once and keeps it for later tasks (:func:`_model`) and runs
one shard at a time, with the worker's threads as torch's. A study whose environment
generates text (``multi-turn-self``, user simulators, model-driven environments) generates
it once, in the planning task; the driving process writes it to ``generations.json``
(:func:`belieflens.store.manifest.write_generations`) and every shard task that renders the
study replays it (:class:`~belieflens.run.generation_log.ReplayGenerator`, logging what it
answers), so no worker generates it again and the shards' read-outs and generation log are
the planning run's. Faults:

- a worker dies mid-shard: the scheduler runs the task again elsewhere (a task that raises is
  retried ``RETRIES`` times), and the shard resumes from its partial file;
- the driving process dies: rerunning the same command plans again, keeps the finished
  shards and resumes the partial ones;
- a directory holding another study's shards is refused in one line unless ``overwrite``.

:mod:`belieflens.store.cache` opens a finished study directory as one dask-backed
``xarray.Dataset`` and merges it into the single file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from belieflens.episodes.base import Environment
from belieflens.errors import (
    CacheFileError,
    InterruptedRunError,
    StorageError,
)
from belieflens.model.init import TRAINED, Init
from belieflens.model.load import LoadedModel
from belieflens.run import signals
from belieflens.run.checkpoint import CHECKPOINT_SECONDS
from belieflens.run.cluster import DaskClient
from belieflens.run.extract import ExtractOptions, Prepared, Progress, check_rows, write_rows
from belieflens.run.generation_log import GeneratingEnvironment, GenerationRecord
from belieflens.run.job import ExtractJob, Models, check_directory
from belieflens.store import manifest as mf
from belieflens.store.cache import shard_attrs
from belieflens.store.fingerprint import differences
from belieflens.store.lock import write_lock

RETRIES = 2
"""Times the driving process reruns a shard task that raised (a dead worker's tasks are always
rescheduled by the scheduler, up to distributed's ``allowed-failures``); never one that found
no space left or an I/O error."""

@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs to run a study: plain, picklable values (an
    :class:`~belieflens.run.job.ExtractJob` without its runtime, the models by name)."""

    env: str
    params: Mapping[str, object]
    models: Models
    """The models by name or path, and how each worker loads them."""
    options: ExtractOptions
    make_env: Callable[..., Environment]
    """Builds the environment from ``env`` and ``params`` on the worker (e.g.
    :func:`belieflens.envs.get`: a module-level function, so the job pickles)."""
    checkpoint_seconds: float = CHECKPOINT_SECONDS
    """The most seconds of compute between two saves of a shard's finished read-outs."""

    @classmethod
    def of(cls, job: ExtractJob) -> ShardJob:
        """What the workers of ``job`` run (its models by name, its environment rebuilt by
        ``job.make_env``: :class:`ExtractJob` refuses a cluster job without them)."""
        return cls(env=job.env.name, params=dataclasses.asdict(job.env.params),
                   models=job.models, options=job.options, make_env=job.env_factory(),
                   checkpoint_seconds=job.runtime.checkpoint_seconds)

    def key(self) -> str:
        """A canonical text of the job (what a worker's cached preparation is keyed by)."""
        m = self.models
        return json.dumps([self.env, dict(self.params), m.model, m.simulator, m.device,
                           m.dtype, m.kernels, str(m.init), repr(self.options)],
                          sort_keys=True, default=str)

    def resources(self) -> dict[str, float] | None:
        """Dask resources a task asks for: one ``GPU`` on CUDA, none otherwise."""
        return {"GPU": 1} if self.models.device == "cuda" else None


@dataclass(frozen=True)
class StudyPlan:
    """What the driving process needs to cut a study into shards."""

    queries: int
    window: int
    study: dict[str, Any]
    fingerprint: str
    episode_of_row: np.ndarray
    load_seconds: float
    generations: tuple[dict[str, Any], ...] = ()
    """Every text the planning task generated (:meth:`GenerationRecord.to_json`, in call
    order, with episodes): the shard tasks replay them instead of generating again."""


@dataclass(frozen=True)
class ShardResult:
    """A finished shard: where, which rows, and what it cost on its worker."""

    index: int
    rows: tuple[int, int]
    path: str
    pid: int
    seconds: float
    """Wall time of the task on the worker."""
    load_seconds: float
    """Time spent loading the model (0 when the worker had it already)."""
    prepare_seconds: float
    """Time spent rendering the study (0 when the worker had it already)."""
    resumed: int
    """Rows that were already complete in a partial file (not computed again)."""
    tokens: int
    replayed: bool = False
    """The task rendered the study from the planning task's generated text
    (``generations.json``) rather than generating it."""


@dataclass(frozen=True)
class StudyRun:
    """The result of :func:`run_study`."""

    directory: Path
    plan_seconds: float
    shards: tuple[ShardResult, ...] = field(default=())
    skipped: int = 0
    """Shards that were finished before this run."""


# --- worker side -------------------------------------------------------------------------

_LOCK = threading.Lock()
"""One study task at a time per process (a worker's threads are torch's threads)."""

_MODELS: dict[tuple[str, str, str, str, str], LoadedModel] = {}
"""Models loaded in this process, kept for the next task."""

_PREPARED: dict[str, tuple[Environment, Prepared, dict[str, str]]] = {}
"""The last study prepared in this process (bound environment, preparation, attributes)."""


def _model(spec: str, job: ShardJob, init: Init = TRAINED) -> tuple[LoadedModel, float]:
    m = job.models
    key = (spec, m.device, m.dtype, m.kernels, str(init))
    if key in _MODELS:
        return _MODELS[key], 0.0
    from belieflens.model.load import quiet_libraries
    t0 = time.perf_counter()
    with quiet_libraries():
        loaded = m.load(spec, init=init, where=" on a worker")
    _MODELS[key] = loaded
    return loaded, time.perf_counter() - t0


def _set_threads(job: ShardJob) -> None:
    import torch

    n = job.options.threads
    if n == 0:
        try:
            from distributed import get_worker

            n = int(get_worker().state.nthreads)
        except (ImportError, ValueError):
            n = 0
    if n > 0:
        torch.set_num_threads(n)


def _prepared(
    job: ShardJob, replay: Callable[[], list[GenerationRecord]] | None = None
) -> tuple[LoadedModel, Environment, Prepared, dict[str, str], float, float]:
    """The job's model, bound environment, preparation and attributes, cached per process.

    ``replay`` gives the study's generated text (the planning task's records) when the
    study must be prepared here: its environment then replays them instead of generating.
    """
    from belieflens.run import extract as cache_extract
    from belieflens.run.batched import bind_run
    _set_threads(job)
    spec, simulator = job.models.names()
    model, load_s = _model(spec, job, job.models.init)
    key = job.key()
    if key in _PREPARED:
        env, prep, attrs = _PREPARED[key]
        return model, env, prep, attrs, load_s, 0.0
    t0 = time.perf_counter()
    sim: LoadedModel | None = None
    if simulator is not None and (simulator != model.info.spec
                                  or model.info.init != "trained"):
        sim, s = _model(simulator, job)
        load_s += s
    env, attrs = bind_run(job.make_env(job.env, **dict(job.params)), model, simulator=sim,
                          replay=replay() if replay is not None else None,
                          gen_batch=job.options.gen_batch, budget=job.options.max_memory)
    prep = cache_extract.prepare(env, model, job.options)
    _PREPARED.clear()
    _PREPARED[key] = (env, prep, attrs)
    return model, env, prep, attrs, load_s, time.perf_counter() - t0


def plan_task(job: ShardJob) -> StudyPlan:
    """Worker task: render the whole study and report its size, rows and fingerprint."""
    with _LOCK:
        _, env, prep, _, load_s, _ = _prepared(job)
        log = env.log.records if isinstance(env, GeneratingEnvironment) else ()
        return StudyPlan(
            queries=len(prep.recs), window=job.options.window, study=prep.study.to_json(),
            fingerprint=prep.study.fingerprint(),
            episode_of_row=np.array([r.episode for r in prep.recs], dtype=np.int32),
            load_seconds=load_s, generations=tuple(r.to_json() for r in log),
        )


def shard_task(
    job: ShardJob, index: int, rows: tuple[int, int], directory: str, fingerprint: str,
    replay: bool = False,
) -> ShardResult:
    """Worker task: write (or resume) shard ``index``, the study's rows ``[start, stop)``.

    ``replay``: the study generates text, which the planning task generated and the driving
    process wrote to ``generations.json``: a worker that prepares the study replays it.
    """
    t0 = time.perf_counter()
    replayed = [False]

    def records() -> list[GenerationRecord]:
        replayed[0] = True
        return [GenerationRecord.from_json(o)
                for o in mf.read_generations(Path(directory), fingerprint)]

    with _LOCK:
        model, env, prep, attrs, load_s, prep_s = _prepared(job, records if replay else None)
        if prep.study.fingerprint() != fingerprint:
            raise CacheFileError(
                f"worker pid {os.getpid()} prepared another study than the driving process "
                f"(fingerprint {prep.study.fingerprint()[:12]} vs {fingerprint[:12]}): do the "
                "workers run "
                "the same belieflens, model files and parameters?"
            )
        out = Path(directory) / mf.shard_name(index)
        seen: list[Progress] = []
        if _finished_shard(out, fingerprint, rows):
            return ShardResult(index, rows, str(out), os.getpid(), time.perf_counter() - t0,
                               load_s, prep_s, rows[1] - rows[0], 0, replayed[0])
        with _worker_signals() as stop, write_lock(out):
            write_rows(
                env, model, out, job.options, prep, stop=stop, rows=rows,
                on_progress=seen.append,
                extra_attrs={**attrs, "shard_of": fingerprint, "shard_index": index,
                             "shard_rows": list(rows)},
                checkpoint_seconds=job.checkpoint_seconds,
            )
        last = seen[-1] if seen else Progress(0, 0, 0, 0.0)
        return ShardResult(index, rows, str(out), os.getpid(), time.perf_counter() - t0,
                           load_s, prep_s, last.resumed, last.tokens, replayed[0])


def _worker_loop() -> Any:
    """The event loop of the Dask worker running this task (``None`` outside a worker)."""
    try:
        from distributed import get_worker

        return get_worker().loop
    except (ImportError, ValueError):
        return None


def _on_loop(loop: Any, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in the worker's main thread (its event loop's) and return its result."""
    done: Future[Any] = Future()

    def call() -> None:
        try:
            done.set_result(fn())
        except BaseException as e:  # handed to the waiting task thread
            done.set_exception(e)

    loop.add_callback(call)
    return done.result(timeout=30)


@contextmanager
def _worker_signals() -> Iterator[signals.Stop]:
    """SIGINT and SIGTERM handled in this worker process for the task's length, as in one
    process: the shard finishes its batch, saves what is finished, prints the line of what
    was saved (:class:`~belieflens.errors.InterruptedRunError`) and the worker then goes at
    once as the signal asked, with the handler it had before. The scheduler sees a lost
    worker and runs the task again elsewhere, from the saved rows. (Not by failing the task
    and living on for a moment: the task run again could land on this worker and take the
    worker's own signal for a new one.) Outside a worker, nothing is installed. Yields the
    process's :class:`~belieflens.run.signals.Stop`, which the shard's saver checks."""
    loop = _worker_loop()
    if loop is None:
        yield signals.STOP
        return
    previous = _on_loop(loop, lambda: signals.install(signals.STOP, raising=False))
    try:
        yield signals.STOP
    except InterruptedRunError as e:
        print(f"interrupted: worker pid {os.getpid()}: {e}", file=sys.stderr, flush=True)
        raise
    finally:
        signum = signals.STOP.signum
        _on_loop(loop, lambda: signals.restore(previous))
        signals.STOP.reset()
        if signum is not None:  # what was finished is synced: the worker goes now
            os.kill(os.getpid(), signum)


# --- driving process ---------------------------------------------------------------------

def _finished_shard(path: Path, fingerprint: str, rows: tuple[int, int]) -> bool:
    """Whether ``path`` is a finished shard of the study ``fingerprint`` holding ``rows``."""
    if not path.is_file():
        return False
    attrs = shard_attrs(path)
    return attrs.get("shard_of") == fingerprint and attrs.get("shard_rows") == list(rows)


def _our_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir()
                  if p.name.startswith("shard-") or p.name.startswith(mf.MANIFEST_NAME)
                  or p.name.startswith(mf.GENERATIONS_NAME))


def _prepare_directory(directory: Path, overwrite: bool) -> mf.Manifest | None:
    """Check ``directory`` may hold the study (:func:`~belieflens.run.job.check_directory`),
    creating it if new; the manifest already there (if any)."""
    check_directory(directory)
    if not directory.exists():
        directory.mkdir()
        return None
    if mf.manifest_path(directory).exists():
        try:
            return mf.read_manifest(directory)
        except CacheFileError as e:
            if not overwrite:
                raise CacheFileError(f"{e}; pass --overwrite to discard the directory's "
                                     "shards") from None
            _clear(directory)
            return None
    if any(p.name.startswith("shard-") for p in directory.iterdir()):
        if not overwrite:
            raise CacheFileError(
                f"{directory} holds shard files but no {mf.MANIFEST_NAME}: pass --overwrite "
                "to discard them"
            )
        _clear(directory)
    return None


def _clear(directory: Path) -> None:
    for p in _our_files(directory):
        p.unlink()


def default_shard_windows(windows: int, workers: int) -> int:
    """Windows per shard giving about three shards per worker."""
    return max(1, -(-windows // (3 * max(1, workers))))


def run_study(
    client: DaskClient,
    job: ShardJob,
    directory: Path,
    *,
    shard_episodes: int = 0,
    overwrite: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
) -> StudyRun:
    """Extract ``job``'s study into the study directory ``directory`` on ``client``'s cluster.

    ``shard_episodes``: about that many episodes per shard, rounded to whole windows (0: about
    three shards per worker). An existing
    directory of the same study is resumed with its own shard layout; one of another study
    is refused (:class:`CacheFileError`, one line) unless ``overwrite``, which discards its
    shards. The directory must be visible to every worker at the same path. Its caller handles
    SIGINT and SIGTERM (:class:`belieflens.run.lifecycle.Extraction`): a signal cancels the
    shards not finished and gives one line of what is done.
    """
    directory = Path(directory).absolute()
    created = not directory.exists()
    old = _prepare_directory(directory, overwrite)
    t0 = time.perf_counter()
    try:
        plan: StudyPlan = client.submit(plan_task, job, pure=False, retries=RETRIES,
                                        resources=job.resources()).result()
    except BaseException:
        if created:  # a study that could not be planned leaves nothing behind
            with suppress(OSError):
                directory.rmdir()
        raise
    plan_s = time.perf_counter() - t0
    if old is not None and old.study_fingerprint != plan.fingerprint:
        if not overwrite:
            what = differences(dict(old.study), plan.study)
            raise CacheFileError(
                f"{directory} holds shards of another study ({what}): pass --overwrite to "
                "discard them, or rerun with its options to resume it"
            )
        _clear(directory)
        old = None
    manifest = old if old is not None else _new_manifest(client, job, plan, shard_episodes)
    for i, s in enumerate(manifest.shards):
        check_rows(s.rows, plan.queries, plan.window)
        done = _finished_shard(directory / s.file, plan.fingerprint, s.rows)
        manifest = manifest.with_shard(i, "done" if done else "pending")
    pending = [i for i, s in enumerate(manifest.shards) if s.state == "pending"]
    if plan.generations:  # written before any shard task can read it
        mf.write_generations(directory, plan.fingerprint, plan.generations)
    mf.write_manifest(directory, manifest)
    manifest, results = _run_shards(client, job, directory, plan, manifest, pending,
                                    on_progress=on_progress, t0=t0)
    mf.write_manifest(directory, replace(manifest, state="complete"))
    return StudyRun(directory, plan_s, tuple(sorted(results, key=lambda r: r.index)),
                    skipped=len(manifest.shards) - len(pending))


def _new_manifest(
    client: DaskClient, job: ShardJob, plan: StudyPlan, shard_episodes: int
) -> mf.Manifest:
    """The manifest of a study not started yet: its shards of whole windows."""
    n_windows = -(-plan.queries // plan.window)
    workers = len(client.scheduler_info().get("workers", {}))
    k = default_shard_windows(n_windows, workers)
    if shard_episodes:
        per_episode = plan.queries / max(1, job.options.episodes)
        k = max(1, round(shard_episodes * per_episode / plan.window))
    return mf.Manifest(
        study_fingerprint=plan.fingerprint, study=plan.study, queries=plan.queries,
        window=plan.window, shards=mf.layout(plan.queries, plan.window, k,
                                            plan.episode_of_row.tolist()),
    )


def _run_shards(
    client: DaskClient, job: ShardJob, directory: Path, plan: StudyPlan,
    manifest: mf.Manifest, pending: list[int], *,
    on_progress: Callable[[Progress], None] | None, t0: float,
) -> tuple[mf.Manifest, list[ShardResult]]:
    """Run the ``pending`` shards, marking each done in the manifest as it finishes.

    Returns the final manifest and the shards' results in order of completion. A task that
    fails is run again up to ``RETRIES`` times, but not one that found no space left or an
    I/O error (:class:`StorageError`: its line is raised here, as rerunning into the same
    disk would fail again). On any error the shards not yet finished are cancelled; SIGINT
    or SIGTERM give one line of what is done (:class:`InterruptedRunError`).
    """
    import distributed

    dd: Any = distributed  # untyped
    total = plan.queries
    finished = sum(s.rows[1] - s.rows[0] for s in manifest.shards if s.state == "done")
    if on_progress is not None:
        on_progress(Progress(finished, total, 0, 0.0, resumed=finished))

    def submit(i: int) -> Any:
        return client.submit(shard_task, job, i, manifest.shards[i].rows, str(directory),
                             plan.fingerprint, bool(plan.generations), pure=False,
                             resources=job.resources())

    futures = {submit(i): i for i in pending}
    tries = dict.fromkeys(pending, 1)
    results: list[ShardResult] = []
    tokens = 0
    try:
        done = dd.as_completed(list(futures))
        for fut in done:
            i = futures[fut]
            if fut.status == "error" and _retry(fut.exception(), tries[i]):
                tries[i] += 1
                again = submit(i)
                futures[again] = i
                done.add(again)
                continue
            r: ShardResult = fut.result()
            results.append(r)
            manifest = manifest.with_shard(r.index, "done")
            mf.write_manifest(directory, manifest)
            finished += r.rows[1] - r.rows[0]
            tokens += r.tokens
            if on_progress is not None:
                on_progress(Progress(finished, total, tokens, time.perf_counter() - t0))
    except InterruptedRunError as e:
        client.cancel(list(futures))
        done_shards = sum(s.state == "done" for s in manifest.shards)
        raise InterruptedRunError(
            f"{done_shards} of {len(manifest.shards)} shards done in {directory} ({finished} "
            f"of {total} read-outs); rerun the same command to resume", e.signum) from None
    except BaseException:
        client.cancel(list(futures))
        raise
    return manifest, results


def _retry(error: BaseException | None, tries: int) -> bool:
    """Whether a shard task that failed with ``error`` after ``tries`` runs runs again."""
    return tries <= RETRIES and not isinstance(error, StorageError)


# --- reading -----------------------------------------------------------------------------

