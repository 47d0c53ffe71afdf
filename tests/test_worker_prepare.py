"""A judge worker draws the hidden inputs of the run's built-in tasks while its template starts
(judge/worker.py `_prepare_cases`): on an H200 host the template takes 14-17 s and a task's
first evaluation in each worker spent about 4 s drawing inputs on the CPU. Never longer than the
template takes, suite tasks left to their first job, the same values the oracle would draw."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.registry import get_task
from judge import oracle
from judge.device import detect_target
from judge.worker import PREPARE_ENV, Worker


@pytest.mark.slow
def test_the_runs_tasks_inputs_are_drawn_while_the_template_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path.cwd())  # Worker.close changes directory to /
    monkeypatch.setenv(PREPARE_ENV, "no_such_task,vector_add")
    w = Worker()
    try:
        assert w.prepared > 0
        task = get_task("vector_add")
        first = task.cases("hidden", w.target.interpreter)[0]
        key = (task.id, first, w.device, False)
        assert key in oracle._CACHE.entries
        drawn = oracle._CACHE.entries[key]
        assert all(a.equal(b) for a, b in zip(drawn, task.inputs(first, w.device), strict=True))  # the oracle's values
        job = {"id": 1, "task": "vector_add", "source": task.baseline_source(), "case_set": "visible", "timeout": 300}
        assert w.handle(job)["evaluation"]["verdict"]["kind"] == "correct"
    finally:
        w.close()


def test_preparing_stops_once_the_template_is_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PREPARE_ENV, "vector_add,softmax")
    ready: Future[Any] = Future()
    ready.set_result(None)
    fake = SimpleNamespace(target=detect_target(), device="cpu")
    assert Worker._prepare_cases(fake, ready) == 0  # type: ignore[arg-type]
