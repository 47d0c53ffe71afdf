"""The MethodContext the scheduler hands a method: the only door to the model, to visible
feedback and to submissions. Every event is written to the store as it happens, with the
calls and tokens spent so far, which is what the budget curves are drawn from."""

from __future__ import annotations

from bench.task import Task
from methods.base import Candidate, Feedback, TestResult
from modelio.ledger import Account
from modelio.types import Completion, Message
from results.store import Store
from runners.evaluator import Evaluator, RunInterrupted


class UnitContext:
    def __init__(self, task: Task, account: Account, evaluator: Evaluator, store: Store, vendor: str):
        self.task = task
        self.account = account
        self.evaluator = evaluator
        self.store = store
        self.vendor = vendor
        self.n_candidates = 0
        self.n_feedback = 0
        self.n_submissions = 0
        self.n_test_runs = 0
        self.run_index = -1  # no run declared yet: candidates carry -1
        self._run_unrecorded = False  # declared, but its first call has not gone through yet
        self._submitted_hash: str | None = None

    @property
    def _key(self) -> dict[str, object]:
        return {"method": self.account.method, "task": self.account.task, "repeat": self.account.repeat}

    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            json_mode: bool = False) -> Completion:
        if self.evaluator.stopping.is_set():
            raise RunInterrupted()
        start = self.account.spend.calls
        completion = self.account.complete(messages, temperature=temperature, role=role, max_tokens=max_tokens,
                                           json_mode=json_mode)
        if self._run_unrecorded:  # a run is recorded once it has spent something, never as an empty stub
            self.store.begin_run(self.account.method, self.account.task, self.account.repeat, self.run_index, start)
            self._run_unrecorded = False
        return completion

    def calls_used(self) -> int:
        return self.account.spend.calls

    def remaining(self) -> int:
        return self.account.remaining()

    def propose(self, source: str) -> Candidate:
        h = self.store.put_source(source)
        candidate = Candidate(index=self.n_candidates, source=source, calls_used=self.account.spend.calls)
        self.store.record_event("candidates", {**self._key, "candidate_index": candidate.index,
                                               "calls_used": candidate.calls_used,
                                               "tokens_used": self.account.spend.total_tokens, "source_hash": h,
                                               "run_index": self.run_index})
        self.n_candidates += 1
        return candidate

    def feedback(self, candidate: Candidate, timing: bool = True) -> Feedback:
        evaluation = self.evaluator.evaluate(self.task.id, candidate.source, "visible", timing=timing)
        v, t = evaluation.verdict, evaluation.timing
        self.store.record_event("feedback", {**self._key, "feedback_index": self.n_feedback,
                                             "calls_used": self.account.spend.calls,
                                             "source_hash": self.store.put_source(candidate.source), "verdict": v.kind})
        self.n_feedback += 1
        return Feedback(verdict=v.kind, message=v.message, failing_case=v.failing_case,
                        latency_ms=t.candidate_ms if t else None, speedup=t.speedup_vs_baseline if t else None)

    def begin_run(self) -> None:
        """A new independent run starts, so the one before it finished: recorded, so that
        pass@k over runs is computed from declared runs rather than inferred from positions."""
        self.close_run()
        self.run_index += 1
        self._run_unrecorded = True

    def close_run(self) -> None:
        """Mark the current run finished (the scheduler calls it when a method returns by itself)."""
        if self.run_index >= 0 and not self._run_unrecorded:
            self.store.end_run(self.account.method, self.account.task, self.account.repeat, self.run_index,
                               self.account.spend.calls)

    def run_tests(self, candidate: Candidate, tests: str) -> Feedback:
        """The method's own test functions against a candidate, run by the sandboxed worker.
        Recorded in `test_runs` (with the tests' source), not in `feedback`: that table holds
        visible verdicts only, and a reviewer must be able to tell the two kinds apart."""
        report = self.evaluator.run_tests(self.task.id, candidate.source, tests)
        self.store.record_event("test_runs", {**self._key, "test_run_index": self.n_test_runs,
                                              "calls_used": self.account.spend.calls,
                                              "source_hash": self.store.put_source(candidate.source),
                                              "tests_hash": self.store.put_source(tests),
                                              "verdict": report.verdict.kind,
                                              "tests_passed": sum(t.passed for t in report.tests),
                                              "tests_total": len(report.tests)})
        self.n_test_runs += 1
        v = report.verdict
        return Feedback(verdict=v.kind, message=v.message, failing_case=v.failing_case, latency_ms=None,
                        speedup=None, tests=tuple(TestResult(t.name, t.passed, t.message) for t in report.tests),
                        kind="tests")

    def submit(self, candidate: Candidate) -> None:
        h = self.store.put_source(candidate.source)
        if h == self._submitted_hash:
            return
        self._submitted_hash = h
        self.store.record_event("submissions", {**self._key, "submission_index": self.n_submissions,
                                                "calls_used": self.account.spend.calls,
                                                "tokens_used": self.account.spend.total_tokens, "source_hash": h})
        self.n_submissions += 1
