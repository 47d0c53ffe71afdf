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
    (spare, started), = worker.spares.waiting
    if started is not None:  # on a GPU a thread starts it and reads its ready message
        started.join(120)
    else:
        spare.wait_ready(60)
    assert spare.ready  # it said it was ready, then died
    spare.kill()
    verdict = _judge(worker, 1)
    assert verdict["kind"] == "correct", verdict
    # The spare was refilled when the dead one was set aside: the next job takes it.
    assert len(worker.spares.waiting) == 1
    assert _judge(worker, 2)["kind"] == "correct"


@pytest.mark.slow
def test_the_next_spare_exists_while_a_candidate_is_judged(worker: Worker) -> None:
    seen: list[Any] = []
    body = worker._judge_job

    def watching(task: Any, job: dict[str, Any], proc: Any) -> Any:
        seen.append((proc.pid, worker.spares.waiting[0][0].pid if worker.spares.waiting else None))
        return body(task, job, proc)

    worker._judge_job = watching  # type: ignore[method-assign]
    assert _judge(worker, 1)["kind"] == "correct"
    (running, spare), = seen
    assert spare is not None and spare != running



@pytest.mark.slow
def test_with_two_spares_each_job_takes_the_oldest_and_two_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """`KMC_SPARES=2`: two candidate processes forked ahead; a job takes the one forked first
    (on a GPU its context has had the longest to be made) and the worker forks one more."""
    from judge.spares import SPARES_ENV

    monkeypatch.chdir(Path.cwd())
    monkeypatch.setenv(SPARES_ENV, "2")
    w = Worker()
    try:
        first, second = (proc.pid for proc, _ in w.spares.waiting)
        taken: list[int] = []
        body = w._judge_job

        def watching(task: Any, job: dict[str, Any], proc: Any) -> Any:
            taken.append(proc.pid)
            return body(task, job, proc)

        w._judge_job = watching  # type: ignore[method-assign]
        assert _judge(w, 1)["kind"] == "correct"
        assert taken == [first]
        assert [proc.pid for proc, _ in w.spares.waiting][0] == second and len(w.spares.waiting) == 2
        assert _judge(w, 2)["kind"] == "correct" and taken == [first, second]
    finally:
        w.close()


@pytest.mark.parametrize(("value", "count"), [("", 1), ("2", 2), ("4", 4), ("0", 1), ("9", 1), ("two", 1)])
def test_the_spare_count_is_read_safely(value: str, count: int) -> None:
    from judge.spares import _spare_count

    assert _spare_count(value) == count


@pytest.mark.slow
def test_a_job_retried_alone_takes_a_ticket_marked_alone(worker: Worker, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """The pool retries a job alone after a GPU out-of-memory error (runners/pool.py); its ticket
    is marked so, which is what makes the other workers hand their idle blocks back before
    waiting behind it (judge/gate.py). A plain job takes no exclusive ticket of its own."""
    import judge.worker as worker_module
    from judge.gate import GATE_ENV

    monkeypatch.setenv(GATE_ENV, str(tmp_path / "gate"))
    asked: list[tuple[bool, bool]] = []
    real = worker_module.gpu_gate

    def recording(exclusive: bool, clock: Any = None, background: bool = False, alone: bool = False) -> Any:
        asked.append((exclusive, alone))
        return real(exclusive, clock=clock, background=background, alone=alone)

    monkeypatch.setattr(worker_module, "gpu_gate", recording)
    job = {"id": 1, "task": "vector_add", "source": get_task("vector_add").baseline_source(),
           "case_set": "visible", "timeout": 300}
    assert worker.handle({**job, "alone": True})["evaluation"]["verdict"]["kind"] == "correct"
    assert asked[0] == (True, True)
    asked.clear()
    assert worker.handle({**job, "id": 2})["evaluation"]["verdict"]["kind"] == "correct"
    assert (True, True) not in asked
