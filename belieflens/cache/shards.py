"""Sharded extraction on Dask distributed: a study directory of standalone shard files.

A study is cut into shards of whole *windows* (the resume unit, ``--window`` queries: the
span whose batches and shared prefixes are computed together). Each shard is written by
:func:`belieflens.cache.extract.extract` with ``rows=(start, stop)``: the shard renders and
sizes the whole study exactly as one process would (every episode is a function of
``(seed, episode)`` alone, see :mod:`belieflens.envs`), then runs only its own windows,
with the usual crash-safe partial file and resume. Because each window is batched exactly
as in the single-process run, the shards concatenated along ``query`` equal the file one
process writes, bit for bit on CPU. Shard boundaries are window boundaries, not episode
boundaries: a window may cut an episode, which then spans two shards.

Dask does all scheduling. :func:`run_study` (the driving process) submits one planning task,
then one task per unfinished shard, and keeps the manifest (:mod:`belieflens.cache.manifest`).
Each worker process loads a model once and keeps it for later tasks (:func:`_model`) and runs
one shard at a time, with the worker's threads as torch's. A study whose environment
generates text (``multi-turn-self``, user simulators, model-driven environments) generates
it once, in the planning task; the driving process writes it to ``generations.json``
(:func:`belieflens.cache.manifest.write_generations`) and every shard task that renders the
study replays it (:class:`~belieflens.cache.generation_log.ReplayGenerator`, logging what it
answers), so no worker generates it again and the shards' read-outs and generation log are
the planning run's. Faults:

- a worker dies mid-shard: the scheduler runs the task again elsewhere (a task that raises is
  retried ``RETRIES`` times), and the shard resumes from its partial file;
- the driving process dies: rerunning the same command plans again, keeps the finished
  shards and resumes the partial ones;
- a directory holding another study's shards is refused in one line unless ``overwrite``.

:func:`open_cache` opens a study directory as one dask-backed ``xarray.Dataset``
(``xr.open_mfdataset`` over the shards, checked against the manifest) and a single file
as :func:`belieflens.cache.store.open_cache` does; :func:`merge` writes the single file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.cache import manifest as mf
from belieflens.cache.cluster import DaskClient
from belieflens.cache.extract import ExtractOptions, Prepared, Progress, check_rows
from belieflens.cache.generation_log import GeneratingEnvironment, GenerationRecord
from belieflens.cache.integrity import verify_file
from belieflens.cache.lock import write_lock
from belieflens.cache.models import LoadedModel
from belieflens.cache.resume import FINGERPRINT_ATTR, STUDY_ATTR, differences
from belieflens.cache.store import (
    MODEL_ROWS,
    SCHEMA,
    STR,
    PartialFile,
    Sizes,
    StoreDType,
    VarSpec,
    chunk_rows,
    create_partial,
    partial_path,
)
from belieflens.cache.store import open_cache as open_file
from belieflens.dims import QUERY, dim
from belieflens.envs.base import Environment
from belieflens.errors import CacheFileError, ParameterError
from belieflens.types import DeviceName, DTypeName, KernelName

RETRIES = 2
"""Times the scheduler reruns a shard task that raised (a dead worker's tasks are always
rescheduled, up to distributed's ``allowed-failures``)."""

SHARD_ATTRS = ("shard_of", "shard_index", "shard_rows")
"""Root attributes only a shard file has: the whole study's fingerprint, its index, its rows."""


@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs to run a study: plain, picklable values."""

    env: str
    params: Mapping[str, object]
    model: str
    options: ExtractOptions
    simulator: str | None = None
    device: DeviceName = "cpu"
    dtype: DTypeName = "float32"
    kernels: KernelName = "auto"
    threads: int = 0
    """torch threads per worker; 0: the worker's thread count."""

    def key(self) -> str:
        """A canonical text of the job (what a worker's cached preparation is keyed by)."""
        return json.dumps([self.env, dict(self.params), self.model, self.simulator,
                           self.device, self.dtype, self.kernels,
                           repr(self.options)], sort_keys=True, default=str)

    def resources(self) -> dict[str, float] | None:
        """Dask resources a task asks for: one ``GPU`` on CUDA, none otherwise."""
        return {"GPU": 1} if self.device == "cuda" else None


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

_MODELS: dict[tuple[str, str, str, str], LoadedModel] = {}
"""Models loaded in this process, kept for the next task."""

_PREPARED: dict[str, tuple[Environment, Prepared, dict[str, str]]] = {}
"""The last study prepared in this process (bound environment, preparation, attributes)."""


def _model(spec: str, job: ShardJob) -> tuple[LoadedModel, float]:
    key = (spec, job.device, job.dtype, job.kernels)
    if key in _MODELS:
        return _MODELS[key], 0.0
    from belieflens.cache import models

    t0 = time.perf_counter()
    with models.quiet_libraries():
        loaded = models.load(spec, device=job.device, dtype=job.dtype, kernels=job.kernels)
    _MODELS[key] = loaded
    return loaded, time.perf_counter() - t0


def _set_threads(job: ShardJob) -> None:
    import torch

    n = job.threads
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
    from belieflens.cache import extract as cache_extract
    from belieflens.cache.generate import bind_run
    from belieflens.envs import get

    _set_threads(job)
    model, load_s = _model(job.model, job)
    key = job.key()
    if key in _PREPARED:
        env, prep, attrs = _PREPARED[key]
        return model, env, prep, attrs, load_s, 0.0
    t0 = time.perf_counter()
    sim: LoadedModel | None = None
    if job.simulator is not None and job.simulator != model.info.spec:
        sim, s = _model(job.simulator, job)
        load_s += s
    env, attrs = bind_run(get(job.env, **dict(job.params)), model, simulator=sim,
                          replay=replay() if replay is not None else None)
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
    from belieflens.cache import extract as cache_extract

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
        cache_extract.extract(
            env, model, out, job.options, rows=rows, prepared=prep, on_progress=seen.append,
            extra_attrs={**attrs, "shard_of": fingerprint, "shard_index": index,
                         "shard_rows": list(rows)},
        )
        last = seen[-1] if seen else Progress(0, 0, 0, 0.0)
        return ShardResult(index, rows, str(out), os.getpid(), time.perf_counter() - t0,
                           load_s, prep_s, last.resumed, last.tokens, replayed[0])


# --- driving process ---------------------------------------------------------------------

def _finished_shard(path: Path, fingerprint: str, rows: tuple[int, int]) -> bool:
    """Whether ``path`` is a finished shard of the study ``fingerprint`` holding ``rows``."""
    if not path.is_file():
        return False
    attrs = _shard_attrs(path)
    return attrs.get("shard_of") == fingerprint and attrs.get("shard_rows") == list(rows)


def _shard_attrs(path: Path) -> dict[str, Any]:
    import h5py

    try:
        with h5py.File(path, "r", locking=False) as h:
            raw = {k: h.attrs[k] for k in ("shard_of", "shard_rows", "status") if k in h.attrs}
    except (OSError, KeyError, ValueError) as e:
        raise CacheFileError(f"{path} is unreadable: {e}") from None
    out: dict[str, Any] = {}
    for k, v in raw.items():
        text = v.decode() if isinstance(v, bytes) else str(v)
        out[k] = json.loads(text) if k == "shard_rows" else text
    return out


def _our_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir()
                  if p.name.startswith("shard-") or p.name.startswith(mf.MANIFEST_NAME)
                  or p.name.startswith(mf.GENERATIONS_NAME))


def _prepare_directory(directory: Path, overwrite: bool) -> mf.Manifest | None:
    """Check ``directory`` may hold the study; the manifest already there (if any)."""
    if directory.exists() and not directory.is_dir():
        raise ParameterError(
            f"option '--out' = '{directory}' is not allowed: with --cluster it is a study "
            "directory, and a file of that name exists"
        )
    if not directory.exists():
        if not directory.parent.is_dir():
            raise ParameterError(
                f"option '--out' = '{directory}' is not allowed: folder {directory.parent} "
                "does not exist"
            )
        directory.mkdir()
        return None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ParameterError(f"option '--out' = '{directory}' is not allowed: not writable")
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
    shards. The directory must be visible to every worker at the same path.
    """
    import distributed

    dd: Any = distributed  # untyped

    if shard_episodes < 0:
        raise ParameterError(
            f"option '--shard-episodes' = {shard_episodes} is not allowed: >= 1, or 0 for auto"
        )
    directory = Path(directory).absolute()
    old = _prepare_directory(directory, overwrite)
    t0 = time.perf_counter()
    plan: StudyPlan = client.submit(plan_task, job, pure=False, retries=RETRIES,
                                    resources=job.resources()).result()
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
    if old is not None:
        manifest = old
    else:
        n_windows = -(-plan.queries // plan.window)
        workers = len(client.scheduler_info().get("workers", {}))
        k = default_shard_windows(n_windows, workers)
        if shard_episodes:
            per_episode = plan.queries / max(1, job.options.episodes)
            k = max(1, round(shard_episodes * per_episode / plan.window))
        manifest = mf.Manifest(
            study_fingerprint=plan.fingerprint, study=plan.study, queries=plan.queries,
            window=plan.window, shards=mf.layout(plan.queries, plan.window, k,
                                                plan.episode_of_row.tolist()),
        )
    for i, s in enumerate(manifest.shards):
        check_rows(s.rows, plan.queries, plan.window)
        done = _finished_shard(directory / s.file, plan.fingerprint, s.rows)
        manifest = manifest.with_shard(i, "done" if done else "pending")
    pending = [i for i, s in enumerate(manifest.shards) if s.state == "pending"]
    if plan.generations:  # written before any shard task can read it
        mf.write_generations(directory, plan.fingerprint, plan.generations)
    mf.write_manifest(directory, manifest)
    total = plan.queries
    finished = sum(s.rows[1] - s.rows[0] for s in manifest.shards if s.state == "done")
    if on_progress is not None:
        on_progress(Progress(finished, total, 0, 0.0, resumed=finished))
    futures = [
        client.submit(shard_task, job, i, manifest.shards[i].rows, str(directory),
                      plan.fingerprint, bool(plan.generations), pure=False, retries=RETRIES,
                      resources=job.resources())
        for i in pending
    ]
    results: list[ShardResult] = []
    tokens = 0
    try:
        for fut in dd.as_completed(futures):
            r: ShardResult = fut.result()
            results.append(r)
            manifest = manifest.with_shard(r.index, "done")
            mf.write_manifest(directory, manifest)
            finished += r.rows[1] - r.rows[0]
            tokens += r.tokens
            if on_progress is not None:
                on_progress(Progress(finished, total, tokens, time.perf_counter() - t0))
    except BaseException:
        client.cancel(futures)
        raise
    from dataclasses import replace

    mf.write_manifest(directory, replace(manifest, state="complete"))
    return StudyRun(directory, plan_s, tuple(sorted(results, key=lambda r: r.index)),
                    skipped=len(manifest.shards) - len(pending))


# --- reading -----------------------------------------------------------------------------

def _checked_shards(directory: Path) -> tuple[mf.Manifest, list[Path]]:
    """The manifest and shard paths of a complete study directory, each shard checked."""
    m = mf.read_manifest(directory)
    waiting = [s.file for s in m.shards if s.state != "done"]
    if m.state != "complete" or waiting:
        raise CacheFileError(
            f"{directory} is incomplete ({len(m.shards) - len(waiting)} of {len(m.shards)} "
            "shards done): rerun the same `belieflens extract` command to resume"
        )
    paths = []
    for s in m.shards:
        p = directory / s.file
        if not p.is_file():
            raise CacheFileError(f"{directory}: shard {s.file} is missing")
        attrs = _shard_attrs(p)
        if attrs.get("status") != "complete":
            raise CacheFileError(f"{p} is incomplete (status {attrs.get('status')!r})")
        if attrs.get("shard_of") != m.study_fingerprint:
            raise CacheFileError(
                f"{p} is a shard of another study (fingerprint "
                f"{str(attrs.get('shard_of'))[:12]}, the manifest's {m.study_fingerprint[:12]})"
            )
        if attrs.get("shard_rows") != list(s.rows):
            raise CacheFileError(
                f"{p} holds rows {attrs.get('shard_rows')}, the manifest says {list(s.rows)}"
            )
        paths.append(p)
    return m, paths


def open_study(directory: Path, *, chunks: Mapping[str, int] | None = None) -> xr.Dataset:
    """One dask-backed ``xarray.Dataset`` over a study directory's shards, in query order.

    Checked against the manifest first (every shard finished, of this study, rows with no
    gap and no duplicate); each shard is opened by :func:`belieflens.cache.store.open_cache`
    (its checks, and every chunk read against its checksum), with ``chunks`` (default: whole
    HDF5 chunks of rows, as many as keep the widest per-query variable's dask chunk under
    about 8 MiB, so a task's memory is bounded whatever the study's size), and the shards
    are concatenated along ``query``. It holds
    what plain xarray gives with::

        xr.open_mfdataset(sorted(glob("DIR/shard-*.h5")), engine="h5netcdf", combine="nested",
                          concat_dim="query", data_vars="minimal", coords="minimal",
                          compat="override", combine_attrs="override")

    with the whole study's ``study`` and ``study_fingerprint`` as attributes.
    """
    m, paths = _checked_shards(directory)
    rows = default_chunk_rows(paths[0], chunk_rows(m.window)) if paths else 1
    parts = [open_file(p, chunks=dict(chunks) if chunks else {QUERY: rows}) for p in paths]
    ds = xr.concat(parts, dim=QUERY, data_vars="minimal", coords="minimal", compat="override",
                   join="outer", combine_attrs="override")
    attrs = {k: v for k, v in ds.attrs.items() if k not in SHARD_ATTRS}
    attrs[STUDY_ATTR] = json.dumps(dict(m.study), sort_keys=True, default=str)
    attrs[FINGERPRINT_ATTR] = m.study_fingerprint
    ds.attrs = attrs

    # the shards' closers only: a closure over the shard datasets kept each one's eagerly
    # loaded variables alive beside their concatenation, as long as the study was open
    closers = [part._close for part in parts]
    del parts

    def close() -> None:
        for closer in closers:
            if closer is not None:
                closer()

    ds.set_close(close)
    return ds


CHUNK_BYTES = 8 * 2**20
"""About the most bytes a default dask chunk of one per-query variable holds."""


def default_chunk_rows(path: Path, rows: int, budget: int = CHUNK_BYTES) -> int:
    """Rows per dask chunk: a multiple of the file's ``rows`` per HDF5 chunk, as many as keep
    the widest per-query variable's chunk under ``budget`` bytes (at least one HDF5 chunk)."""
    import h5netcdf

    widest = 1
    with h5netcdf.File(path, "r") as f:
        for var in f.variables.values():
            if var.dimensions[:1] == (QUERY,) and len(var.shape) > 1 and var.dtype != str:
                widest = max(widest, int(np.prod(var.shape[1:])) * np.dtype(var.dtype).itemsize)
    return rows * max(1, budget // (rows * widest))


def cache_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files that hold a cache: ``path`` itself, or a study directory's shard files in
    query order (checked against its manifest first)."""
    p = Path(path)
    if p.is_dir():
        return _checked_shards(p)[1]
    return [p]


def open_cache(
    path: str | os.PathLike[str], *, chunks: Mapping[str, int] | None = None
) -> xr.Dataset:
    """Open a cache file (:func:`belieflens.cache.store.open_cache`) or a study directory
    (:func:`open_study`: one dask-backed dataset over its shards) as an ``xarray.Dataset``."""
    p = Path(path)
    if p.is_dir():
        return open_study(p, chunks=chunks)
    return open_file(p, chunks=chunks)


def _spec_of(name: str, var: Any) -> VarSpec:
    dtype = var.dtype
    kind: StoreDType
    if dtype is str or getattr(dtype, "kind", "") in "OSU":
        kind = STR
    else:
        code = np.dtype(dtype).str[1:]
        kind = "f8" if code == "f8" else "f4" if code == "f4" else "i1" if code == "i1" else "i4"
    return VarSpec(name, tuple(dim(d) for d in var.dimensions), kind,
                   str(var.attrs.get("description", "")))


def _slabs(paths: list[Path], rows: list[tuple[int, int]], names: list[str],
           step: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    import h5netcdf

    for p, (lo, hi) in zip(paths, rows, strict=True):
        with h5netcdf.File(p, "r") as f:
            for a in range(0, hi - lo, step):
                b = min(a + step, hi - lo)
                yield lo + a, {n: np.asarray(f.variables[n][a:b]) for n in names
                               if n in f.variables}


def merge(directory: str | os.PathLike[str], out: str | os.PathLike[str], *,
          overwrite: bool = False) -> Path:
    """Write the single cache file one process would have written from a study directory.

    Its variables equal the single-process file's bit for bit; its attributes are the first
    shard's provenance with the whole study's ``study`` and ``study_fingerprint``.
    """
    import h5netcdf

    directory, target = Path(directory), Path(out)
    if target.is_dir():
        raise ParameterError(f"'{target}' is a directory: merge writes one .h5 file")
    if target.exists() and not overwrite:
        raise ParameterError(f"{target} exists; pass --overwrite to replace it")
    if not target.parent.is_dir():
        raise ParameterError(f"folder {target.parent} does not exist")
    m, paths = _checked_shards(directory)
    for p in paths:  # nothing is written from a damaged shard: every chunk checked first
        verify_file(p)
    sizes = Sizes(**m.study["sizes"])
    window = m.window
    with write_lock(target):
        partial_path(target).unlink(missing_ok=True)
        with h5netcdf.File(paths[0], "r") as f:
            attrs = {k: v for k, v in f.attrs.items()
                     if k not in (*SHARD_ATTRS, "status", "schema_version")}
            static = {n: np.asarray(v[...]) for n, v in f.variables.items()
                      if QUERY not in v.dimensions}
            extra = [_spec_of(n, v) for n, v in f.variables.items() if n not in SCHEMA]
            row_names = [n for n, v in f.variables.items()
                         if v.dimensions[:1] == (QUERY,) and n not in MODEL_ROWS
                         and n != "complete"]
            model_names = [n for n in MODEL_ROWS if n in f.variables]
            resid_dtype = str(f.variables["resid"].dtype)
        attrs[STUDY_ATTR] = json.dumps(dict(m.study), sort_keys=True, default=str)
        attrs[FINGERPRINT_ATTR] = m.study_fingerprint
        rows = [s.rows for s in m.shards]
        step = max(window, 1024)
        create_partial(target, sizes, attrs, static=static,
                       row_slabs=_slabs(paths, rows, row_names, step), resid_dtype=resid_dtype,
                       rows_per_chunk=chunk_rows(window), extra=extra)
        writer = PartialFile(partial_path(target))
        for start, values in _slabs(paths, rows, model_names, window):
            writer.write_rows(start, values)
        return writer.finish(target)
