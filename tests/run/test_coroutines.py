"""Jobs driven step by step: requests served together, items in job order with their notes,
one job running at a time, forked functions beside their job, failures and early exits
cancelling every job."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from belieflens.run import coroutines
from belieflens.run.coroutines import Failure, ask, drive, fork, note


def _job(name: str, steps: int, log: list[str]) -> Iterator[str]:
    """Asks ``steps`` times, noting each answer, yielding an item after every two asks."""
    for k in range(steps):
        log.append(f"{name} runs {k}")
        answer = ask((name, k))
        note(answer)
        if k % 2 == 1:
            yield f"{name} item {k}"
    yield f"{name} done"


class Served:
    """A serve function that answers ``(name, k)`` with ``name:k`` (anything else with
    ``ok``) and records each step's requests."""

    def __init__(self) -> None:
        self.steps: list[list[Any]] = []

    def __call__(self, requests: list[Any]) -> list[Any]:
        self.steps.append(list(requests))
        return [f"{r[0]}:{r[1]}" if isinstance(r, tuple) else "ok" for r in requests]


def test_requests_of_a_step_are_served_together_and_items_come_in_job_order() -> None:
    log: list[str] = []
    serve = Served()
    jobs = [_job("a", 3, log), _job("b", 1, log), _job("c", 2, log)]
    out = list(drive(jobs, serve, window=8))
    assert serve.steps[0] == [("a", 0), ("b", 0), ("c", 0)]
    assert serve.steps[1] == [("a", 1), ("c", 1)]
    assert serve.steps[2] == [("a", 2)]
    assert [item for item, _ in out] == ["a item 1", "a done", "b done", "c item 1", "c done"]
    # each item carries the notes made since the job's previous item
    assert [notes for _, notes in out] == [["a:0", "a:1"], ["a:2"], ["b:0"], ["c:0", "c:1"], []]
    # one job runs at a time, in job order within a step
    assert log[:3] == ["a runs 0", "b runs 0", "c runs 0"]


def test_window_bounds_the_jobs_in_flight_and_later_jobs_start_as_others_end() -> None:
    serve = Served()
    log: list[str] = []
    jobs = [_job(str(i), 2 if i else 4, log) for i in range(5)]
    out = list(drive(jobs, serve, window=2))
    assert max(len(s) for s in serve.steps) == 2
    assert serve.steps[0] == [("0", 0), ("1", 0)]
    assert serve.steps[2] == [("0", 2), ("2", 0)]  # job 1 ended: job 2 took its place
    assert [item for item, _ in out][-1] == "4 done" and len(out) == 5 * 2 + 1


def test_jobs_that_never_ask_run_once_each() -> None:
    def plain(i: int) -> Iterator[int]:
        yield i

    assert [i for i, _ in drive([plain(0), plain(1)], Served(), window=1)] == [0, 1]


def _asker(events: list[str]) -> Iterator[str]:
    try:
        ask("x")
        yield "never"
    finally:
        events.append("unwound")


def test_a_failing_job_stops_the_drive_and_cancels_the_others() -> None:
    events: list[str] = []

    def bad() -> Iterator[str]:
        raise ValueError("broken episode")
        yield "never"

    with pytest.raises(ValueError, match="broken episode"):
        list(drive([_asker(events), bad(), _asker(events)], Served(), window=4))
    assert events == ["unwound", "unwound"]
    assert not [t for t in threading.enumerate() if t.name.startswith("episode-job")]


def test_a_failure_answer_is_raised_in_the_job_that_asked() -> None:
    def catcher() -> Iterator[str]:
        try:
            ask("x")
        except KeyError as e:
            yield f"caught {e.args[0]}"

    def serve(requests: list[Any]) -> list[Any]:
        return [Failure(KeyError("no such prompt")) for _ in requests]

    assert [i for i, _ in drive([catcher()], serve, window=1)] == ["caught no such prompt"]


def test_an_error_of_serve_and_an_early_exit_cancel_every_waiting_job() -> None:
    events: list[str] = []

    def broken(requests: list[Any]) -> list[Any]:
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        list(drive([_asker(events), _asker(events)], broken, window=2))
    assert events == ["unwound", "unwound"]

    events.clear()
    running = drive([_job("a", 4, []), _asker(events)], Served(), window=2)
    next(running)
    running.close()  # the consumer stops: the waiting job unwinds
    assert events == ["unwound"]
    assert not [t for t in threading.enumerate() if t.name.startswith("episode-job")]


def test_ask_and_note_outside_a_job_are_errors() -> None:
    assert coroutines.current() is None
    with pytest.raises(RuntimeError, match="outside"):
        ask("x")
    with pytest.raises(RuntimeError, match="outside"):
        note("x")
    with pytest.raises(ValueError, match="window"):
        list(drive([], Served(), window=0))


def _forking(name: str, log: list[str]) -> Iterator[str]:
    """Asks once, forks a helper that asks twice, asks again, then takes the helper's value."""
    note(ask((name, 0)))

    def helper() -> str:
        log.append(f"{name} helper starts")
        note(ask((f"{name}-helper", 0)))
        note(ask((f"{name}-helper", 1)))
        return f"{name} helped"

    forked = fork(helper)
    note(ask((name, 1)))
    yield forked.result()


def test_a_forked_function_runs_beside_its_job_and_hands_over_value_and_notes() -> None:
    serve = Served()
    log: list[str] = []
    out = list(drive([_forking("a", log), _forking("b", log)], serve, window=2))
    assert serve.steps[0] == [("a", 0), ("b", 0)]
    # both jobs and both helpers ask together; a job waits on its helper without asking
    assert serve.steps[1] == [("a", 1), ("b", 1), ("a-helper", 0), ("b-helper", 0)]
    assert serve.steps[2] == [("a-helper", 1), ("b-helper", 1)]
    assert [item for item, _ in out] == ["a helped", "b helped"]
    # the helper's notes follow the job's own, as a sequential run makes them
    assert out[0][1] == ["a:0", "a:1", "a-helper:0", "a-helper:1"]


def test_fork_outside_a_drive_runs_when_its_value_is_asked_for() -> None:
    calls: list[int] = []

    def counted() -> int:
        calls.append(1)
        return len(calls)

    forked = fork(counted)
    assert calls == []
    assert forked.result() == 1 and forked.result() == 1 and calls == [1]


def test_a_failing_forked_function_stops_the_drive() -> None:
    def job() -> Iterator[str]:
        def broken() -> str:
            ask("x")
            raise ValueError("helper broke")

        forked = fork(broken)
        ask("y")
        yield forked.result()

    with pytest.raises(ValueError, match="helper broke"):
        list(drive([job()], Served(), window=1))
    assert not [t for t in threading.enumerate() if t.name.startswith("episode-job")]
