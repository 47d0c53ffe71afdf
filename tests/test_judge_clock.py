"""The candidate's clock stops while the judge works (judge/remote.py `judge_side`): a case's
inputs, the reference's answer and the comparison are the judge's seconds, not the candidate's.
Before, a slow suite reference (autotuned for every new shape) used up the limit of the
candidate judged against it: 12 of 100 GEAK-eval TritonBench references timed out on an H200."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runners.pool import JUDGE_MARGIN_S, backstop_seconds


def _candidate_process() -> Any:
    from judge.remote import CandidateProcess

    ours, theirs = socket.socketpair()
    theirs.close()
    return CandidateProcess(SimpleNamespace(device="cpu"), pid=0, sock=ours)  # type: ignore[arg-type]


def test_the_judges_work_moves_the_deadline_by_what_it_took() -> None:
    proc = _candidate_process()
    proc.start_clock(10.0)
    before = proc.deadline
    with proc.judge_side():
        time.sleep(0.2)
    assert 0.19 <= proc.deadline - before < 1.0


def test_the_clock_stops_for_at_most_the_limit_once_more() -> None:
    proc = _candidate_process()
    proc.start_clock(0.1)
    before = proc.deadline
    for _ in range(3):
        with proc.judge_side():
            time.sleep(0.08)
    assert proc.deadline - before == pytest.approx(0.1, abs=1e-6)
    assert proc.stopped_allowance == 0.0


def test_the_pools_backstop_allows_for_the_stopped_clock() -> None:
    assert backstop_seconds(150.0) == 2 * 150.0 + JUDGE_MARGIN_S


class _Watching:
    """A runner that says whether the judge's side is open (LocalRunner underneath)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.open = False
        self.calls_inside = 0

    @contextlib.contextmanager
    def judge_side(self) -> Iterator[None]:
        self.open = True
        try:
            yield
        finally:
            self.open = False

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        self.calls_inside += self.open
        return self.inner.submit(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_inputs_and_reference_answers_are_made_on_the_judges_side(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from bench.registry import get_task
    from judge.oracle import judge_cases
    from tests.helpers import in_process_runner

    task = get_task("vector_add")
    runner = _Watching(in_process_runner(task, task.baseline_source(), tmp_path, "kmc_candidate_clock_1"))
    outside: list[str] = []

    def watched(make: Any, what: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            if not runner.open:
                outside.append(what)
            return make(*args, **kwargs)
        return run

    watched_task = dataclasses.replace(task, id="vector_add_clock_test",
                                       reference=watched(task.reference, "reference"),
                                       make_inputs=watched(task.make_inputs, "inputs"))
    verdict = judge_cases(watched_task, runner, task.cases("visible", True)[:2], "cpu", True)
    assert verdict.correct, verdict
    assert outside == []
    assert runner.calls_inside == 0  # the candidate's own calls run on its clock


def test_a_workers_first_job_of_an_adapted_task_waits_for_its_probes() -> None:
    """The first job of an adapted task in a worker records the suite and waits for its shape
    probes (judge's work): the backstop allows `PROBING_WALL_S` more, once per worker and task."""
    from bench.adapters.shape_probe import PROBING_WALL_S
    from bench.registry import load_sources
    from runners.pool import first_job_allowance

    load_sources([f"geak-eval:{Path(__file__).parent / 'fixtures' / 'geak_eval'}"], "cpu")
    assert first_job_allowance("tb-add_vectors", set()) == PROBING_WALL_S
    assert first_job_allowance("tb-add_vectors", {"tb-add_vectors"}) == 0.0
    assert first_job_allowance("vector_add", set()) == 0.0  # built in: nothing recorded or probed
    assert first_job_allowance("no-such-task", set()) == 0.0
