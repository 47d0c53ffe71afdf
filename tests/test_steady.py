"""Which re-runs of a failing case say its text quoted garbage (judge/candidate/reruns.py, design
invariant 8): only a failure at the same call (case and attempt) with another text. A
candidate whose re-runs differ because of its own memo (seen on an H200: caches_data_ptr.py's
re-runs got the same addresses back and were served remembered results) keeps its text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from judge.candidate.reruns import RERUNS, at_attempt, attempt_of, steady_verdict
from judge.candidate.value_text import VARYING
from judge.candidate.verdict import Verdict

CASE = "hidden-n97-float32-s0"
REFILL = "after in-place refill"
STALE = Verdict("wrong_result", at_attempt("output: 97/97 elements outside atol; first at flat index 0: got 1.5", REFILL),
                CASE, 3.0, 1.0)


def _rejudged(*answers: Verdict) -> tuple[list[str], Callable[[str], Verdict]]:
    asked: list[str] = []
    it = iter(answers)

    def rejudge(name: str) -> Verdict:
        asked.append(name)
        return next(it)

    return asked, rejudge


def test_attempts_are_named_and_read_back() -> None:
    from judge.oracle import REPEAT

    for attempt in ("first", REFILL, REPEAT):
        assert attempt_of(at_attempt("output: 3/8 elements outside atol (shape (8,))", attempt)) == attempt
    assert attempt_of("the output of this case changed after later calls (first run): a buffer reused") == "first"
    assert attempt_of("two runs on the same inputs gave different results (a race?)") is None
    assert attempt_of("RuntimeError: boom (it passed on a re-run)") is None


def test_a_memo_served_at_an_earlier_attempt_keeps_the_first_text() -> None:
    """The H200's case: a re-run's first call is served the remembered result (no launch) when
    the allocator hands back the same address, or the re-run fails at the refill as the first
    judgement did; none fails at the refill with another text."""
    served = Verdict("no_kernel", at_attempt("the entry point returned without launching a Triton kernel", "first"), CASE)
    asked, rejudge = _rejudged(served, STALE, served, served)
    assert steady_verdict(STALE, rejudge, "cpu", disturb=lambda rerun: None) == STALE
    assert asked == [CASE] * RERUNS


def test_re_runs_that_disagree_among_themselves_elsewhere_are_described() -> None:
    """Garbage that passes one re-run and fails another call in the next is not a memo's steady
    history: the first text, which quoted it, is replaced (suspected cause of a rare same-seed
    replay difference in the full suite while any outcome elsewhere kept the first text)."""
    other = Verdict("wrong_result", at_attempt("output: 90/97 elements outside atol; first at flat index 1: got 0.5",
                                               "first"), CASE)
    passed = Verdict("correct", "", None)
    _, rejudge = _rejudged(passed, other, passed, passed)
    assert steady_verdict(STALE, rejudge, "cpu", disturb=lambda rerun: None).message == f"output: {VARYING}"


def test_another_text_at_the_same_attempt_is_described_even_after_passes() -> None:
    garbage = Verdict("wrong_result", at_attempt("output: 12/97 elements outside atol; first at flat index 40: got 7.25",
                                                 REFILL), CASE)
    passed = Verdict("correct", "", None)
    _, rejudge = _rejudged(passed, passed, garbage, STALE)
    varying = steady_verdict(STALE, rejudge, "cpu", disturb=lambda rerun: None)
    assert varying.message == f"output: {VARYING}" and varying.kind == "wrong_result" and varying.failing_case == CASE
    # A failure that names no attempt (a crash, a raised exception) is compared as before.
    crash = Verdict("crash", "the candidate process died (signal 11)", CASE)
    _, rejudge = _rejudged(crash)
    assert steady_verdict(STALE, rejudge, "cpu", disturb=lambda rerun: None).message == f"output: {VARYING}"


MEMO_BY_SHAPE = Path(__file__).resolve().parent / "hostile" / "caches_by_shape.py"


def test_a_memoising_candidate_judged_in_process_keeps_its_refill_text(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The real oracle and re-runs, in this process on the interpreter: a candidate memoising by
    shape (as caches_data_ptr.py does by address where the allocator hands addresses back)
    fails at the refill, and its re-runs, served from the memo at their first call, do not
    turn that text into the note about garbage memory. The interpreter is asked for before the
    candidate's kernels are defined, so this runs on CPU tensors on a GPU machine too (seen
    failing there: the compiled launcher refuses CPU tensors)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from bench.registry import get_task
    from judge.oracle import judge_cases
    from tests.helpers import in_process_runner

    task = get_task("vector_add")
    runner = in_process_runner(task, MEMO_BY_SHAPE.read_text(), tmp_path, "kmc_candidate_memo_77")
    cases = task.cases("visible", True)[:1]
    first = judge_cases(task, runner, cases, "cpu", True)
    assert first.kind == "wrong_result" and attempt_of(first.message) == REFILL, first
    seen: list[Verdict] = []

    def alone(name: str) -> Verdict:
        again = judge_cases(task, runner, tuple(c for c in cases if c.name == name), "cpu", True)
        seen.append(again)
        return again

    assert steady_verdict(first, alone, "cpu") == first
    assert seen and all(attempt_of(v.message) == "first" for v in seen), seen  # served from the memo, no launch
