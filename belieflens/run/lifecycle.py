"""One extraction, start to end: :class:`Extraction` runs an
:class:`~belieflens.run.job.ExtractJob`.

It is the one owner of a run's lifecycle, in this order:

1. every input checked and the models found (:meth:`ExtractJob.check`), before anything heavy;
2. SIGINT and SIGTERM handled (:func:`belieflens.run.signals.handled`), once for the run;
3. in this process: the write lock of ``out`` taken (:func:`belieflens.store.lock.write_lock`),
   once, before the models load, so a second writer is refused at once; the models loaded, the
   environment's generations bound to them (:func:`belieflens.run.batched.bind_run`), the study
   rendered (:func:`belieflens.run.extract.prepare`) and its rows written with checkpoints and
   resume (:func:`belieflens.run.extract.write_rows`);
4. or, with a cluster: the study cut into shards that Dask workers write into the study
   directory ``out`` (:func:`belieflens.run.shards.run_study`).

A signal before any read-out is computed stops in one line that says nothing was saved;
after, the batch finishes, what is finished is saved and the line says what
(:class:`~belieflens.errors.InterruptedRunError`). :func:`belieflens.extract` and the
command line's ``extract`` make the job and run it; :func:`write_cache` runs one on a model
already loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from belieflens.episodes.base import Environment
from belieflens.errors import InterruptedRunError
from belieflens.model.load import LoadedModel, ModelInfo
from belieflens.run import signals
from belieflens.run.checkpoint import CHECKPOINT_SECONDS, stopped_before
from belieflens.run.cluster import DaskClient
from belieflens.run.extract import ExtractOptions, Progress, prepare, write_rows
from belieflens.run.generation_log import GenerationRecord
from belieflens.run.job import ExtractJob, Models, Runtime
from belieflens.store.file import partial_path
from belieflens.store.lock import write_lock


@dataclass(frozen=True)
class ModelLoaded:
    """Reported when a model has been loaded: the evaluated ``model`` or the ``simulator``
    that plays the user; ``threads`` is torch's CPU thread count after the load."""

    role: Literal["model", "simulator"]
    info: ModelInfo
    threads: int


ExtractEvent: TypeAlias = ModelLoaded | GenerationRecord | Progress
"""What an extraction reports while it runs: each model it loads, each text generation, and
progress (:class:`~belieflens.run.extract.Progress`: rows done, tokens, resumed rows)."""


def set_threads(threads: int) -> int:
    """Set torch's CPU threads (0 keeps torch's setting); the count after."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


class Extraction:
    """One :class:`ExtractJob`, run once by :meth:`run`: in this process into a cache file,
    or on a cluster into a study directory. ``on_event`` is called with each
    :data:`ExtractEvent`; ``attrs`` are recorded in the file besides the provenance."""

    def __init__(self, job: ExtractJob, on_event: Callable[[ExtractEvent], None] | None = None,
                 *, attrs: Mapping[str, Any] | None = None) -> None:
        self.job = job
        self.on_event = on_event
        self.attrs = dict(attrs or {})

    def report(self, event: ExtractEvent) -> None:
        """Hand ``event`` to ``on_event``."""
        if self.on_event is not None:
            self.on_event(event)

    def run(self) -> Path:
        """Check the job, then run it; the path written (a cache file, or with a cluster a
        study directory)."""
        self.job.check()
        given = self.job.runtime.cluster
        with signals.handled() as stop:
            if given is None:
                return self._here(stop)
            return self._sharded(given)

    def _here(self, stop: signals.Stop) -> Path:
        """The run in this process, under ``out``'s write lock from before the load."""
        from belieflens.model.load import quiet_libraries

        job, out = self.job, self.job.runtime.out
        with write_lock(out), quiet_libraries():
            try:
                env, model, attrs = self._load_and_bind()
                prepared = prepare(env, model, job.options)
            except InterruptedRunError as e:  # nothing of this run written yet
                raise stopped_before(e, partial_path(out)) from None
            return write_rows(env, model, out, job.options, prepared, stop=stop,
                              on_progress=self.report, extra_attrs=attrs,
                              overwrite=job.runtime.overwrite,
                              checkpoint_seconds=job.runtime.checkpoint_seconds)

    def _load_and_bind(self) -> tuple[Environment, LoadedModel, dict[str, Any]]:
        """The models not loaded yet loaded and the environment's generations bound to them:
        the environment to run, the model, and the attributes to record."""
        from belieflens.run.batched import bind_run
        from belieflens.run.generation_log import requires_generator, requires_simulator

        env, models = self.job.env, self.job.models
        n_threads = set_threads(self.job.options.threads)
        if isinstance(models.model, LoadedModel):
            loaded = models.model
        else:
            loaded = models.load(models.model, init=models.init)
            self.report(ModelLoaded("model", loaded.info, n_threads))
        sim: LoadedModel | None = None
        simulator = models.simulator
        if requires_generator(env) and requires_simulator(env) and simulator is not None:
            if isinstance(simulator, LoadedModel):
                sim = simulator
            elif simulator != loaded.info.spec or loaded.info.init != "trained":
                sim = models.load(simulator, kernels="auto")
                self.report(ModelLoaded("simulator", sim.info, n_threads))
        bound, attrs = bind_run(env, loaded, simulator=sim, on_record=self.report,
                                gen_batch=self.job.options.gen_batch,
                                budget=self.job.options.max_memory)
        return bound, loaded, {**attrs, **self.attrs}

    def _sharded(self, given: DaskClient | str) -> Path:
        """The run on the cluster ``given`` (connected here, and closed after, if a
        ``--cluster`` value), into the study directory ``out``."""
        from belieflens.run import cluster
        from belieflens.run.shards import ShardJob, run_study

        runtime = self.job.runtime
        client = cluster.connect(given) if isinstance(given, str) else given
        try:
            return run_study(client, ShardJob.of(self.job), runtime.out,
                             shard_episodes=runtime.shard_episodes, overwrite=runtime.overwrite,
                             on_progress=self.report).directory
        finally:
            if isinstance(given, str):
                cluster.close(client)


def write_cache(
    env: Environment,
    model: LoadedModel,
    out: Path,
    options: ExtractOptions,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    extra_attrs: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    checkpoint_seconds: float = CHECKPOINT_SECONDS,
) -> Path:
    """Run every read-out of ``options.episodes`` episodes of ``env`` on a model already
    loaded and write the cache file ``out`` (:class:`Extraction`, in this process): returns
    its path. ``extra_attrs`` are recorded besides the provenance; ``on_progress`` gets each
    :class:`~belieflens.run.extract.Progress`."""

    def report(event: ExtractEvent) -> None:
        if on_progress is not None and isinstance(event, Progress):
            on_progress(event)

    job = ExtractJob(env, Models(model), Runtime(Path(out), overwrite=overwrite,
                                                 checkpoint_seconds=checkpoint_seconds),
                     options)
    return Extraction(job, report, attrs=extra_attrs).run()
