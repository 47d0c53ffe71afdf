"""The judge worker's spare candidate process is forked while the previous candidate is being
judged (so its GPU context is made meanwhile). A spare can die before its turn (with a template
the previous candidate killed, where no seccomp filter stops signals): the next candidate must
get a fresh process, not a `crash` verdict for what happened before it existed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.registry import get_task
from judge.worker import Worker


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(Path.cwd())  # Worker.close changes directory to /; the next test needs its own
    w = Worker()
    try:
        yield w
    finally:
        w.close()


def _judge(worker: Worker, job_id: int) -> dict[str, Any]:
    job = {"id": job_id, "task": "vector_add", "source": get_task("vector_add").baseline_source(),
           "case_set": "visible", "timeout": 300}
    return worker.handle(job)["evaluation"]["verdict"]


@pytest.mark.slow
def test_a_dead_spare_is_replaced_and_the_next_candidate_is_judged(worker: Worker) -> None:
    assert worker.spare is not None
    if worker.spare_started is not None:  # on a GPU a thread starts it and reads its ready message
        worker.spare_started.join(120)
    else:
        worker.spare.wait_ready(60)
    assert worker.spare.ready  # it said it was ready, then died
    worker.spare.kill()
    verdict = _judge(worker, 1)
    assert verdict["kind"] == "correct", verdict
    # The spare was refilled when the dead one was set aside: the next job takes it.
    assert worker.spare is not None
    assert _judge(worker, 2)["kind"] == "correct"


@pytest.mark.slow
def test_the_next_spare_exists_while_a_candidate_is_judged(worker: Worker) -> None:
    seen: list[Any] = []
    body = worker._judge_job

    def watching(task: Any, job: dict[str, Any], proc: Any) -> Any:
        seen.append((proc.pid, worker.spare.pid if worker.spare is not None else None))
        return body(task, job, proc)

    worker._judge_job = watching  # type: ignore[method-assign]
    assert _judge(worker, 1)["kind"] == "correct"
    (running, spare), = seen
    assert spare is not None and spare != running

