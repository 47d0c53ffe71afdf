"""The pool hands a freed worker to the most urgent waiting job, in arrival order within an
urgency (runners/idle_workers.py), and a waiter that gives up leaves no ticket behind."""

from __future__ import annotations

import threading
import time

import pytest

from judge.job import Job
from runners.idle_workers import DEFERRABLE, URGENT, IdleWorkers
from runners.pool import DISPATCH_ENV, urgency


def _wait_for_waiters(idle: IdleWorkers[str], n: int) -> None:
    deadline = time.monotonic() + 5
    while idle.waiting() < n:
        assert time.monotonic() < deadline, "the waiting jobs never queued"
        time.sleep(0.005)


def _queue_in_order(idle: IdleWorkers[str], jobs: list[tuple[str, int]]) -> tuple[list[str], list[threading.Thread]]:
    """Each job asks for a worker, one after another (each queued before the next asks); a job
    that gets one records its name and gives the worker back at once."""
    served: list[str] = []
    threads = []
    for i, (name, level) in enumerate(jobs):
        def run(name: str = name, level: int = level) -> None:
            worker = idle.take(level)
            served.append(name)
            idle.give_back(worker)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)
        _wait_for_waiters(idle, i + 1)
    return served, threads


def test_a_freed_worker_goes_to_the_urgent_job_even_when_deferrable_ones_asked_first() -> None:
    idle: IdleWorkers[str] = IdleWorkers()
    served, threads = _queue_in_order(idle, [("hidden 1", DEFERRABLE), ("hidden 2", DEFERRABLE),
                                             ("feedback 1", URGENT), ("hidden 3", DEFERRABLE),
                                             ("feedback 2", URGENT)])
    idle.give_back("w0")  # the one worker frees up with five jobs waiting
    for t in threads:
        t.join(5)
    assert served == ["feedback 1", "feedback 2", "hidden 1", "hidden 2", "hidden 3"]


def test_a_free_worker_is_taken_at_once_whatever_the_urgency() -> None:
    idle: IdleWorkers[str] = IdleWorkers()
    idle.give_back("w0")
    idle.give_back("w1")
    assert idle.take(DEFERRABLE) == "w0"  # first in, first out: devices in turn
    assert idle.take(URGENT) == "w1"
    assert idle.waiting() == 0


def test_a_waiter_interrupted_while_waiting_leaves_no_ticket_that_would_block_the_rest() -> None:
    idle: IdleWorkers[str] = IdleWorkers()
    failed: list[BaseException] = []

    def interrupted() -> None:
        original = idle._changed.wait

        def wait(timeout: float | None = None) -> bool:
            raise KeyboardInterrupt

        idle._changed.wait = wait  # type: ignore[method-assign]
        try:
            idle.take(URGENT)
        except KeyboardInterrupt as exc:
            failed.append(exc)
        finally:
            idle._changed.wait = original  # type: ignore[method-assign]

    t = threading.Thread(target=interrupted)
    t.start()
    t.join(5)
    assert failed and idle.waiting() == 0
    idle.give_back("w0")
    assert idle.take(DEFERRABLE) == "w0"  # a later, less urgent job is not blocked by the lost ticket


@pytest.mark.parametrize(("job", "level"), [
    (Job("vector_add", "src", case_set="visible", timing=True), URGENT),
    (Job("vector_add", "src", case_set="hidden"), DEFERRABLE),
    (Job("vector_add", "src", case_set="hidden", timing=True), DEFERRABLE),
    (Job("vector_add", "src", kind="internal_tests", tests="def test_x(): pass"), URGENT),
])
def test_hidden_judging_yields_to_what_a_method_waits_for(job: Job, level: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert urgency(job) == level
    monkeypatch.setenv(DISPATCH_ENV, "arrival")
    assert urgency(job) == URGENT  # the measurement switch: arrival order for every job
