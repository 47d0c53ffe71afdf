"""The scheduler (runners/compare.py `CompareRun`): units in task order, and a unit's hidden
judging (`_judge_hidden`): every candidate's hidden job and the final submission's timed one go
to the executor together, not one after another, and a failing job still surfaces. In process,
with a recording executor: seconds."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from judge.candidate.internal_tests import InternalTestReport
from judge.candidate.verdict import Evaluation, Verdict
from judge.device import Target
from modelio.simulated import SimulatedModel
from runners.compare import CompareRun
from runners.config import CompareConfig

GPU = Target("nvidia", False, "stand-in GPU", 1)


class Recorder:
    """Judges every source wrong on visible cases (so direct keeps sampling fresh code) and
    correct on hidden ones, slowly, counting how many hidden jobs are in flight at once."""

    size = 4

    def __init__(self, fail_hidden: bool = False) -> None:
        self.fail_hidden = fail_hidden
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0
        self.hidden: list[tuple[str, bool]] = []

    def warm_up(self) -> None:
        pass

    def layout(self) -> dict[str, Any]:
        return {"kind": "recorder", "workers": self.size, "timing_lanes": 1, "chosen": "given", "why": "test"}

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False, timing_policy: Any = None,
                 timeout: float | None = None, compile_through: str = "") -> Evaluation:
        if case_set != "hidden":
            return Evaluation(Verdict("wrong_result", "scripted", "visible-0"))
        if self.fail_hidden:
            raise RuntimeError("the executor lost its workers")
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.hidden.append((source, timing))
        time.sleep(0.05)
        with self.lock:
            self.in_flight -= 1
        return Evaluation(Verdict("correct", cases_run=1, kernel_launched=True))

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        raise AssertionError("direct runs no tests")

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def _run(tmp_path: Path, executor: Recorder) -> tuple[list[str], str | None]:
    """The unit's distinct candidates' sources and its final submission's."""
    # Uncapped evaluations (the matched default caps them at one per two calls): a direct unit
    # with enough distinct candidates for its hidden jobs to overlap.
    config = CompareConfig(budget=8, methods=["direct"], tasks=["vector_add"], seed=3, device="auto",
                           task_sources=[], method_modules=[], match_evals=False)
    run = CompareRun(config, tmp_path, SimulatedModel(), GPU, executor=executor)
    try:
        run.run()
        sources = [run.store.source(h) for h in run.store.unit_candidate_hashes("direct", "vector_add", 0)]
        final = run.store.final_submission("direct", "vector_add", 0)
        return sources, None if final is None else run.store.source(final)
    finally:
        run.close()


def test_a_units_hidden_jobs_run_side_by_side_and_the_final_is_timed(tmp_path: Path) -> None:
    executor = Recorder()
    distinct, final = _run(tmp_path, executor)
    assert len(distinct) >= 3  # enough jobs to overlap
    untimed = [s for s, timed in executor.hidden if not timed]
    # Each candidate once; the final's untimed verdict comes from its timed pass, no job of its
    # own (runners/savings.py).
    assert final is not None and sorted(untimed) == sorted(s for s in distinct if s != final)
    assert [s for s, timed in executor.hidden if timed] == [final]
    assert executor.most_in_flight > 1  # judged in turn, this was 1


def test_a_hidden_job_that_fails_ends_the_run_with_its_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="lost its workers"):
        _run(tmp_path, Recorder(fail_hidden=True))


def test_units_are_scheduled_task_by_task_with_every_method_of_a_task_together(tmp_path: Path) -> None:
    config = CompareConfig(budget=2, methods=["direct", "reflexion", "geak"], tasks=["vector_add", "flip"],
                           repeats=2, seed=0, device="auto", task_sources=[], method_modules=[])
    run = CompareRun(config, tmp_path, SimulatedModel(), GPU, executor=Recorder())
    try:
        order = [(u.task, u.method, u.repeat) for u in run.units]
    finally:
        run.close()
    assert order == [(t, m, r) for t in ("vector_add", "flip") for m in ("direct", "reflexion", "geak")
                     for r in (0, 1)]
