"""Hidden verdicts recorded from earlier results instead of a job (runners/savings.py): the rules
on stored JSON, and, end to end on the CPU interpreter, the same hidden verdicts with and without
the savings on a sample of sources (a correct expert, wrong kernels that fail on the first case
and only on later hidden cases, and sources that fail before any case)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.registry import get_task
from judge.candidate.verdict import Evaluation, Timing, Verdict
from judge.device import Target
from record.store import Store
from runners.evaluator import Evaluator
from runners.savings import carried_failure, untimed_from_timed

ROOT = Path(__file__).resolve().parent
CPU = Target("cpu", True, "Triton CPU interpreter", 0)
GPU = Target("nvidia", False, "a stand-in GPU", 1)


def _stored(kind: str, failing_case: str | None = None, message: str = "", cases_run: int = 0) -> dict[str, Any]:
    return Evaluation(Verdict(kind, message, failing_case, cases_run=cases_run), None).to_json()


@pytest.mark.parametrize(("stored", "carried"), [
    (_stored("syntax_error", message="SyntaxError: invalid syntax"), True),  # before any case
    (_stored("runtime_error", message="import failed: boom"), True),
    (_stored("wrong_result", "visible-a", "outside atol"), True),  # on the first case
    (_stored("wrong_result", "visible-b", "outside atol", cases_run=1), False),  # a later case: not carried
    (_stored("timeout", message="no verdict within 60 s"), False),
    (_stored("crash", message="the candidate process ended (signal 11)"), False),
    (_stored("runtime_error", "visible-a", "CUDA out of memory"), False),  # the pool retries those
    (_stored("correct", cases_run=2), False),  # a pass is never carried
    (None, False)])
def test_only_failures_before_or_on_the_first_case_are_carried(stored: dict[str, Any] | None, carried: bool) -> None:
    decided = carried_failure(stored, "visible-a")
    assert (decided is not None) == carried
    if decided is not None and stored is not None:
        assert decided.verdict.to_json() == stored["verdict"] and decided.timing is None


def test_the_untimed_hidden_job_is_decided_only_by_a_timed_pass() -> None:
    timing = Timing((), speedup_vs_baseline=1.2).to_json()
    passed = {**_stored("correct", cases_run=9), "timing": timing}
    assert untimed_from_timed(passed) is not None and untimed_from_timed(passed).timing is None  # type: ignore[union-attr]
    assert untimed_from_timed(_stored("wrong_result", "perf-4096", "after timing")) is None
    assert untimed_from_timed(None) is None


class Counting:
    """An executor that answers every job with a fixed evaluation and counts them."""

    size = 1

    def __init__(self, evaluation: Evaluation) -> None:
        self.evaluation = evaluation
        self.jobs: list[tuple[str, bool]] = []
        self.hints: list[str] = []

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False, timing_policy: Any = None,
                 timeout: float | None = None, compile_through: str = "") -> Evaluation:
        self.jobs.append((case_set, timing))
        self.hints.append(compile_through)
        return self.evaluation


def test_a_final_submission_that_passes_timed_needs_no_untimed_job(tmp_path: Path) -> None:
    executor = Counting(Evaluation(Verdict("correct", cases_run=3), Timing((), speedup_vs_baseline=1.1)))
    evaluator = Evaluator(executor, Store(tmp_path / "s.sqlite"), GPU)  # type: ignore[arg-type]
    timed = evaluator.evaluate("vector_add", "source", "hidden", timing=True)
    untimed = evaluator.evaluate("vector_add", "source", "hidden", timing=False)
    assert executor.jobs == [("hidden", True)] and evaluator.saved == 1
    assert untimed.verdict == timed.verdict and untimed.timing is None


def test_with_the_savings_off_every_job_runs(tmp_path: Path) -> None:
    executor = Counting(Evaluation(Verdict("syntax_error", "SyntaxError"), None))
    evaluator = Evaluator(executor, Store(tmp_path / "s.sqlite"), CPU, save_jobs=False)  # type: ignore[arg-type]
    evaluator.evaluate("vector_add", "source", "visible", timing=True)
    evaluator.evaluate("vector_add", "source", "hidden")
    assert executor.jobs == [("visible", False), ("hidden", False)] and evaluator.saved == 0


@pytest.mark.parametrize("save_jobs", [True, False])
def test_a_hidden_job_is_told_the_case_its_source_failed_in_its_visible_run(tmp_path: Path, save_jobs: bool) -> None:
    """A failure on the second visible case is not carried over (runners/savings.py), but its
    hidden job's compile pass is told where the run is expected to stop (judge/job.py
    `Job.compile_through`); a visible job, and a source that passed, get no hint."""
    second = get_task("vector_add").visible[1].name
    executor = Counting(Evaluation(Verdict("wrong_result", "outside atol", second, cases_run=1), None))
    evaluator = Evaluator(executor, Store(tmp_path / "s.sqlite"), GPU, save_jobs=save_jobs)  # type: ignore[arg-type]
    evaluator.evaluate("vector_add", "wrong", "visible", timing=True)
    evaluator.evaluate("vector_add", "wrong", "hidden", timing=True)
    executor.evaluation = Evaluation(Verdict("correct", cases_run=2), None)
    evaluator.evaluate("vector_add", "right", "visible", timing=True)
    evaluator.evaluate("vector_add", "right", "hidden")
    evaluator.evaluate("vector_add", "never shown", "hidden")
    assert executor.jobs == [("visible", True), ("hidden", True), ("visible", True), ("hidden", False), ("hidden", False)]
    assert executor.hints == ["", second, "", "", ""]


def _sources() -> dict[str, tuple[str, str]]:
    """name -> (task, source): what a run's hidden judging meets, failures of every stage."""
    vector_add = get_task("vector_add").baseline_source()
    return {
        "expert": ("vector_add", vector_add),
        "wrong on the first case": ("vector_add", vector_add.replace("x + y", "x - y")),
        "wrong only on hidden cases": ("softmax", (ROOT / "fixtures/hidden_gaps/softmax_ignores_inner_stride.py")
                                       .read_text()),
        "syntax error": ("vector_add", vector_add.replace("def vector_add(", "def vector_add((")),
        "fails at import": ("vector_add", "raise RuntimeError('no import')\n" + vector_add),
        "no entry point": ("vector_add", vector_add.replace("def vector_add(", "def add_vectors(")),
    }


@pytest.mark.slow
def test_hidden_verdicts_are_identical_with_and_without_the_savings(tmp_path: Path) -> None:
    from judge.device import detect_target
    from runners.pool import LocalPool

    target = detect_target(force_cpu=True)
    verdicts: dict[bool, dict[str, dict[str, Any]]] = {}
    saved = {}
    with LocalPool(target, workers=1) as pool:
        for save in (True, False):
            evaluator = Evaluator(pool, Store(tmp_path / f"{save}.sqlite"), target, save_jobs=save)
            verdicts[save] = {}
            for name, (task, source) in _sources().items():
                evaluator.evaluate(task, source, "visible", timing=True)
                verdicts[save][name] = evaluator.evaluate(task, source, "hidden").verdict.to_json()
            saved[save] = evaluator.saved
    assert verdicts[True] == verdicts[False]
    assert verdicts[True]["expert"]["kind"] == "correct"
    assert verdicts[True]["wrong only on hidden cases"]["kind"] == "wrong_result"
    assert saved[False] == 0 and saved[True] == 4  # the four failures before or on the first case
