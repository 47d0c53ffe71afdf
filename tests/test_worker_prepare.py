"""A judge worker draws the hidden inputs of the run's built-in tasks while its template starts
(judge/worker.py `_prepare_cases`): the template takes seconds to start, and a task's first
evaluation in each worker spent seconds drawing inputs on the CPU. Never longer than the
template takes, suite tasks left to their first job, the same values the oracle would draw."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.registry import get_task
from bench.task import Task
from judge import case_inputs
from judge.device import detect_target
from judge.worker import PREPARE_ENV, Worker


@pytest.mark.slow
def test_the_runs_tasks_inputs_are_drawn_while_the_template_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path.cwd())  # Worker.close changes directory to /
    monkeypatch.setenv(PREPARE_ENV, "no_such_task,vector_add")
    told: list[tuple[str, tuple[str, ...]]] = []  # what a job tells its task first (Task.start_ahead)
    monkeypatch.setattr(Task, "start_ahead", lambda self, cases: told.append((self.id, tuple(c.name for c in cases))))
    w = Worker()
    try:
        assert w.prepared > 0
        task = get_task("vector_add")
        first = task.cases("hidden", w.target.interpreter)[0]
        key = (task.id, first, w.device, False)
        assert key in case_inputs._CACHE.entries
        drawn = case_inputs._CACHE.entries[key]
        assert all(a.equal(b) for a, b in zip(drawn, task.inputs(first, w.device), strict=True))  # the oracle's values
        job = {"id": 1, "task": "vector_add", "source": task.baseline_source(), "case_set": "visible", "timeout": 300}
        assert w.handle(job)["evaluation"]["verdict"]["kind"] == "correct"
        assert told == [("vector_add", tuple(c.name for c in task.visible))]
    finally:
        w.close()


def test_preparing_stops_once_the_template_is_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PREPARE_ENV, "vector_add,softmax")
    ready: Future[Any] = Future()
    ready.set_result(None)
    fake = SimpleNamespace(target=detect_target(), device="cpu")
    assert Worker._prepare_cases(fake, ready.done) == 0  # type: ignore[arg-type]


def test_the_rest_is_drawn_until_told_to_stop_and_drawn_cases_cost_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `_prepare_rest` runs in the background on a GPU: the remaining cases, until the
    worker closes or the cache is nearly full; a case already drawn is not drawn again."""
    monkeypatch.setenv(PREPARE_ENV, "cumsum")
    monkeypatch.setattr(case_inputs, "_CACHE", case_inputs._InputCache(1 << 30))
    fake = SimpleNamespace(target=detect_target(), device="cpu")
    cases = get_task("cumsum").cases("hidden", fake.target.interpreter)
    asked: list[int] = []

    def stop_after_three() -> bool:
        asked.append(1)
        return len(asked) > 3

    assert Worker._prepare_cases(fake, stop_after_three) == 3  # type: ignore[arg-type]
    drawn = dict(case_inputs._CACHE.entries)
    calls: list[Any] = []
    real = get_task("cumsum").inputs
    monkeypatch.setattr(type(get_task("cumsum")), "inputs", lambda self, c, d: calls.append(c) or real(c, d))
    assert Worker._prepare_cases(fake, lambda: False) == len(cases)  # type: ignore[arg-type]
    assert len(calls) == 2 * (len(cases) - 3)  # two attempts per case; the three drawn before are not drawn again
    assert all(case_inputs._CACHE.entries[k] is v for k, v in drawn.items())


def test_a_key_being_made_by_one_thread_is_waited_for_by_another() -> None:
    import threading
    import time

    cache = case_inputs._InputCache(1 << 20)
    made: list[str] = []

    def slow() -> Any:
        made.append(threading.current_thread().name)
        time.sleep(0.2)
        return (case_inputs.torch.zeros(4),)

    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(("k",), slow)), name=f"t{i}") for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len(got) == 3 and all(g is got[0] for g in got)
    assert cache.used == 16
    tiny = case_inputs._InputCache(0)  # nothing kept: a waiter makes its own once the first is done
    got.clear()
    threads = [threading.Thread(target=lambda: got.append(tiny.get(("k",), slow))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] is not got[1] and tiny.used == 0


_FAULT = "AcceleratorError: CUDA error: an illegal memory access was encountered"


def test_a_device_error_at_a_jobs_end_restarts_the_worker_and_other_errors_still_raise() -> None:
    from judge.job import DEVICE_ERROR

    def faulted(device: str) -> dict[str, float]:
        raise RuntimeError(_FAULT)

    fake = SimpleNamespace(clock=SimpleNamespace(steps={}), device="cuda", fatal="")
    said = Worker._job_memory(fake, faulted)  # type: ignore[arg-type]
    assert "illegal memory access" in said and fake.fatal == DEVICE_ERROR
    fake = SimpleNamespace(clock=SimpleNamespace(steps={}), device="cuda", fatal="")
    assert Worker._job_memory(fake, lambda device: {"memory:released_gib": 0.5}) == ""  # type: ignore[arg-type]
    assert fake.fatal == "" and fake.clock.steps == {"memory:released_gib": 0.5}

    def broken(device: str) -> dict[str, float]:
        raise KeyError("a bug of the judge's own")

    with pytest.raises(KeyError):
        Worker._job_memory(SimpleNamespace(clock=SimpleNamespace(steps={}), device="cuda", fatal=""), broken)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_job_whose_end_finds_the_context_gone_is_answered_for_a_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reply the pool judges again on a restarted worker (runners/pool.py `_run_job_retried`),
    not a worker that dies and leaves the task recorded as a crash."""
    from judge import device_memory
    from judge.job import DEVICE_ERROR

    monkeypatch.chdir(Path.cwd())  # Worker.close changes directory to /
    w = Worker()
    try:
        def faulted(device: str) -> dict[str, float]:
            raise RuntimeError(_FAULT)

        monkeypatch.setattr(device_memory, "job_memory", faulted)
        task = get_task("vector_add")
        reply = w.handle({"id": 1, "task": "vector_add", "source": task.baseline_source(), "case_set": "visible",
                          "timeout": 300})
        assert reply["fatal"] and reply["restart_reason"] == DEVICE_ERROR
        verdict = reply["evaluation"]["verdict"]
        assert verdict["kind"] == "runtime_error" and "illegal memory access" in verdict["message"]
    finally:
        w.close()


@pytest.mark.slow
def test_a_worker_told_so_drops_a_tasks_inputs_at_its_jobs_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench check` judges each task once: its workers keep nothing of a task after its job."""
    from judge.worker import KEEP_TASK_INPUTS_ENV

    monkeypatch.chdir(Path.cwd())  # Worker.close changes directory to /
    task = get_task("vector_add")
    job = {"id": 1, "task": "vector_add", "source": task.baseline_source(), "case_set": "visible", "timeout": 300}
    for keep, kept_after in (("1", True), ("0", False)):
        monkeypatch.setenv(KEEP_TASK_INPUTS_ENV, keep)
        case_inputs._CACHE.forget("vector_add")
        w = Worker()
        try:
            assert w.handle(job)["evaluation"]["verdict"]["kind"] == "correct"
            assert any(k[0] == "vector_add" for k in case_inputs._CACHE.entries) is kept_after
        finally:
            w.close()
