"""Jobs driven step by step, their requests served together: coroutines over plain code.

An environment that generates text builds each episode with ordinary sequential code that
calls a generator and waits for its text. :func:`drive` runs several such jobs at once
without changing that code: each job runs in a thread of its own, but only one thread ever
runs at a time. A job runs until it asks for something (:func:`ask`: a generation, a score)
and then waits; once every job of the window waits or is done, the driver hands all the
pending requests to ``serve`` at once, gives each job its answer, and lets the jobs run on
to their next request, one after another in job order. The jobs so interleave exactly as
coroutines would, deterministically, and a request's answer is whatever ``serve`` makes of
it, never a race.

A job may attach notes to what it yields (:func:`note`: e.g. the record of each generation
it asked for); :func:`drive` yields every item with the notes made since the job's previous
item, in job order, whatever order the jobs finish in. A job may also run a function beside
itself (:func:`fork`): inside a drive the function runs as a job of its own, its requests
served with everyone's, until the job that forked it asks for its value
(:meth:`Forked.result`), which also takes over its notes, after the job's own; outside a
drive it runs when its value is asked for, so sequential code keeps its order and its notes.

An exception in a job stops the drive: the other jobs are cancelled (:class:`Cancelled` is
raised inside them) and the exception is raised by :func:`drive`. So is anything raised in
the driver's own thread (a signal, an error of ``serve``): every job still waiting is
cancelled first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
V = TypeVar("V")

CANCEL_SECONDS = 60.0
"""How long the driver waits for a cancelled job to unwind before leaving it (a daemon)."""


class Cancelled(BaseException):
    """Raised inside a job's thread when the drive stops before the job is done."""


@dataclass(frozen=True)
class Failure:
    """An answer that is an exception: :func:`ask` raises it in the job that asked."""

    error: BaseException


_local = threading.local()


class _Job(Generic[T]):
    """One job in its thread, handing control back and forth with the driver."""

    def __init__(self, job: Iterable[T], name: str, registry: list[_Job[Any]]) -> None:
        self.job = job
        self.registry = registry
        """Every job of the drive; a job forked from this one is appended here."""
        self.go = threading.Semaphore(0)
        self.back = threading.Semaphore(0)
        self.request: Any = None
        self.answer: Any = None
        self.items: list[tuple[T, list[Any]]] = []
        self.notes: list[Any] = []
        self.failed: BaseException | None = None
        self.done = self.cancelled = False
        self.thread = threading.Thread(target=self._main, name=f"episode-job-{name}",
                                       daemon=True)
        registry.append(self)

    def _main(self) -> None:
        self.go.acquire()
        _local.job = self
        try:
            if not self.cancelled:
                for item in self.job:
                    self.items.append((item, self.notes))
                    self.notes = []
        except Cancelled:
            pass
        except BaseException as e:  # handed to the driver, which raises it
            self.failed = e
        finally:
            self.done = True
            self.request = None
            self.back.release()

    def ask(self, request: Any) -> Any:
        """In the job's thread: post ``request``, wait for the driver's answer."""
        self.request = request
        self.back.release()
        self.go.acquire()
        if self.cancelled:
            raise Cancelled
        answer, self.answer, self.request = self.answer, None, None
        if isinstance(answer, Failure):
            raise answer.error
        return answer

    def step(self) -> None:
        """In the driver's thread: let the job run until it asks for something or ends."""
        self.go.release()
        self.back.acquire()

    def cancel(self) -> None:
        """In the driver's thread: unwind a job that is waiting (or not started)."""
        if self.done:
            return
        self.cancelled = True
        self.go.release()
        self.back.acquire(timeout=CANCEL_SECONDS)


def current() -> _Job[Any] | None:
    """The job whose thread this is, or ``None`` outside :func:`drive`'s jobs."""
    job: _Job[Any] | None = getattr(_local, "job", None)
    return job


def ask(request: Any) -> Any:
    """From inside a job: wait until the driver has served ``request``; its answer (a
    :class:`Failure` answer is raised here). Outside a job this is an error."""
    job = current()
    if job is None:
        raise RuntimeError("ask() outside a driven job")
    return job.ask(request)


def note(value: Any) -> None:
    """From inside a job: attach ``value`` to the job's next item (see :func:`drive`)."""
    job = current()
    if job is None:
        raise RuntimeError("note() outside a driven job")
    job.notes.append(value)


class Forked(Generic[V]):
    """A function running beside the job that forked it (:func:`fork`)."""

    def __init__(self, fn: Callable[[], V]) -> None:
        self.fn = fn
        self.job: _Job[Any] | None = None
        self.values: list[V] = []

    def _run(self) -> Iterator[Any]:
        """The forked job: the function's value kept, nothing yielded."""
        self.values.append(self.fn())
        yield from ()

    def result(self) -> V:
        """The function's value: inside a drive, once its job is done (its notes join the
        asking job's); outside one, computed now (once)."""
        if self.job is None:
            if not self.values:
                self.values.append(self.fn())
            return self.values[0]
        ask(_Join(self))
        return self.values[0]


@dataclass(frozen=True)
class _Join:
    """A job's request for the value of a job it forked."""

    forked: Forked[Any]


def fork(fn: Callable[[], V]) -> Forked[V]:
    """Run ``fn`` beside the calling job (see the module docstring); its value comes from
    :meth:`Forked.result`, which must be asked for before the job ends."""
    parent = current()
    forked = Forked(fn)
    if parent is None:
        return forked
    child: _Job[Any] = _Job(forked._run(), f"{parent.thread.name}-fork", parent.registry)
    forked.job = child
    child.thread.start()
    child.step()  # from the parent's thread, which waits: still one thread at a time
    return forked


def drive(
    jobs: Sequence[Iterable[T]], serve: Callable[[list[Any]], Sequence[Any]], *, window: int,
) -> Generator[tuple[T, list[Any]], None, None]:
    """Run ``jobs``, at most ``window`` at a time, serving their pending requests together.

    ``serve`` takes the requests pending at one step (in job order) and returns one answer
    each (a :class:`Failure` to raise in the job that asked). Yields ``(item, notes)`` for
    every item of every job, jobs in order (see the module docstring).
    """
    if window < 1:
        raise ValueError("window must be >= 1")
    every: list[_Job[Any]] = []
    started: list[_Job[T]] = []
    emitted = 0
    try:
        while True:
            while (len(started) < len(jobs)
                   and sum(not j.done for j in started[emitted:]) < window):
                job: _Job[T] = _Job(jobs[len(started)], str(len(started)), every)
                started.append(job)
                job.thread.start()
                job.step()
            _raise_failure(every)
            while emitted < len(started) and started[emitted].done:
                yield from started[emitted].items
                started[emitted].items = []
                emitted += 1
            if emitted == len(jobs):
                return
            _serve_step([j for j in every if not j.done], serve)
    finally:
        for job in every:
            job.cancel()


def _raise_failure(jobs: Iterable[_Job[Any]]) -> None:
    for job in jobs:
        if job.failed is not None:
            raise job.failed


def _serve_step(waiting: list[_Job[Any]], serve: Callable[[list[Any]], Sequence[Any]]) -> None:
    """Serve every waiting job's request at once, hand a job whose forked job is done its
    value (and that job's notes), then let each served job run to its next request."""
    asks = [j for j in waiting if not isinstance(j.request, _Join)]
    joins = [j for j in waiting if isinstance(j.request, _Join)]
    answers = serve([j.request for j in asks]) if asks else []
    if len(answers) != len(asks):
        raise RuntimeError(f"serve answered {len(answers)} of {len(asks)} requests")
    for job, answer in zip(asks, answers, strict=True):
        job.answer = answer
    ready = []
    for job in joins:
        child = job.request.forked.job
        if child is not None and child.done:
            job.notes += child.notes
            child.notes = []
            job.answer = None if child.failed is None else Failure(child.failed)
            ready.append(job)
    for job in waiting:
        if job in asks or job in ready:
            job.step()
