"""The method context: the only door from a method to the model, one-shot examples, visible
feedback, its own tests and submissions. Every event is written to the store as it happens,
with the calls and tokens spent so far, which is what the budget curves are drawn from.

Two objects, on purpose:
- `UnitContext` is the scheduler's side: it holds the task, the ledger account, the
  evaluator, the store and the one-shot retriever, and does the bookkeeping.
- `SealedContext` is what a method receives (`UnitContext.sealed()`): read-only facts
  (`vendor`, `answer_format`) and the verbs, nothing else. It has no instance dictionary and
  no slot that holds the unit, no weak reference, and its verbs are plain methods of the class
  (no closures), so no evaluator, task, store, account or model client is reachable through
  its attributes, its bound methods or their closures. The unit is found through a
  module-level table keyed by the sealed object, emptied when the unit ends. This is a seal
  against a method wandering out of its lane, not a security boundary: a verb's module globals
  (`ctx.ask.__func__.__globals__`) hold that table, `gc` reaches every object, and code running
  in this process can always import the project (methods/* are held to the method-facing
  imports by the import-linter contract; a plugin elsewhere is code the user chose to run).

Symmetry (issue 13): the context, not the method, decides how a candidate is judged: every
visible feedback is requested the same way (timed on a GPU, so correctness is re-checked on
the perf cases for every method) and carries the same information (verdict, failing case,
error text capped at FEEDBACK_TEXT_CAP characters, and when the candidate raised the
traceback of its own lines, judge/candidate/tracebacks.py); the run's `json_mode` applies to every
code-writing call of every method or to none.

Thread safety: a method may call its context from several threads; the ledger account
serialises the calls, and a unit lock keeps the event indices (candidates, feedback, test
runs, submissions, runs) unique and in order.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from bench.oneshot import GuardedRetriever
from bench.task import Task
from judge.policy import FEEDBACK_SHORT
from methods.base import Candidate, Feedback, TestResult
from modelio.ledger import Account, BudgetExhausted
from modelio.types import Completion, Message
from record.store import Store
from runners.evaluator import Evaluator, RunInterrupted

FEEDBACK_TEXT_CAP = 2000  # characters of error text (and of traceback) a method is shown per feedback and per test


def _capped(text: str) -> str:
    return text if len(text) <= FEEDBACK_TEXT_CAP else text[:FEEDBACK_TEXT_CAP] + " [... cut]"


class UnitContext:
    def __init__(self, task: Task, account: Account, evaluator: Evaluator, store: Store, vendor: str, *,
                 examples: GuardedRetriever | None = None, answer_format: str = "fenced", json_mode: bool = False,
                 eval_budget: int | None = None):
        self.task = task
        self.account = account
        self.evaluator = evaluator
        self.store = store
        self.vendor = vendor
        self.examples = examples
        self.answer_format = answer_format
        self.json_mode = json_mode
        self.eval_budget = eval_budget
        self.n_candidates = 0
        self.n_feedback = 0
        self.n_submissions = 0
        self.n_test_runs = 0
        self.run_index = -1  # no run declared yet: candidates carry -1
        self._run_unrecorded = False  # declared, but its first call has not gone through yet
        self._run_independent = True
        self._submitted_hash: str | None = None
        self._shown: dict[str, tuple[str, str, float]] = {}  # example code -> (program, by, similarity)
        self._lock = threading.RLock()

    @property
    def _key(self) -> dict[str, object]:
        return {"method": self.account.method, "task": self.account.task, "repeat": self.account.repeat}

    @property
    def evaluations_used(self) -> int:
        """GPU evaluations this unit asked for: visible feedback and runs of its own tests."""
        return self.n_feedback + self.n_test_runs

    @contextlib.contextmanager
    def sealed(self) -> Iterator[SealedContext]:
        """The method's view of this unit, open for the `with` block: afterwards every verb
        raises (a thread a method left running cannot act for a finished unit)."""
        ctx = SealedContext._open(self)
        try:
            yield ctx
        finally:
            ctx._close()

    # ------------------------------------------------------------------ the model
    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            wants_code: bool = False) -> Completion:
        if self.evaluator.stopping.is_set():
            raise RunInterrupted()
        with self.account.lock:  # one call at a time per unit, so the index below is this call's
            start, index = self.account.spend.calls, self.account.next_index
            completion = self.account.complete(messages, temperature=temperature, role=role, max_tokens=max_tokens,
                                               json_mode=self.json_mode and wants_code)
        with self._lock:
            if self._run_unrecorded:  # a run is recorded once it has spent something, never as an empty stub
                self.store.begin_run(self.account.method, self.account.task, self.account.repeat, self.run_index,
                                     start, self._run_independent)
                self._run_unrecorded = False
            self._record_examples(index, messages)
        return completion

    def _record_examples(self, call_index: int, messages: list[Message]) -> None:
        """Every one-shot example this call's prompt actually shows, with its similarity."""
        text = "\n".join(m.content for m in messages)
        for code, (program, by, similarity) in self._shown.items():
            if code.strip() and code.strip() in text:
                self.store.record_event("examples", {**self._key, "call_index": call_index, "program": program,
                                                     "query_by": by, "similarity": similarity})

    def calls_used(self) -> int:
        return self.account.spend.calls

    def remaining(self) -> int:
        return self.account.remaining()

    def evaluations_left(self) -> int | None:
        return None if self.eval_budget is None else max(0, self.eval_budget - self.evaluations_used)

    # ------------------------------------------------------------------ one-shot examples
    def example(self, query: str, by: str) -> str | None:
        if self.examples is None:
            return None
        shown = self.examples.best(query, by)
        if shown is None:
            return None
        with self._lock:
            self._shown.setdefault(shown.program.code, (shown.program.name, by, shown.similarity))
        return shown.program.code

    # ------------------------------------------------------------------ candidates and feedback
    def propose(self, source: str) -> Candidate:
        h = self.store.put_source(source)
        with self._lock:
            candidate = Candidate(index=self.n_candidates, source=source, calls_used=self.account.spend.calls)
            self.store.record_event("candidates", {**self._key, "candidate_index": candidate.index,
                                                   "calls_used": candidate.calls_used,
                                                   "tokens_used": self.account.spend.total_tokens, "source_hash": h,
                                                   "run_index": self.run_index, "evals_used": self.evaluations_used})
            self.n_candidates += 1
        return candidate

    def _spend_evaluation(self) -> None:
        """Refuse an evaluation past the run's GPU-evaluation budget, like a call past the budget."""
        if self.eval_budget is not None and self.evaluations_used >= self.eval_budget:
            raise BudgetExhausted(f"GPU evaluation budget of {self.eval_budget} spent")

    def feedback(self, candidate: Candidate) -> Feedback:
        with self._lock:
            self._spend_evaluation()
            index = self.n_feedback
            self.n_feedback += 1
        # Visible feedback is timed by the short protocol (few samples against reference timings
        # cached in the worker); the final submission gets the full one (runners/compare.py).
        evaluation = self.evaluator.evaluate(self.task.id, candidate.source, "visible", timing=True,
                                             protocol=FEEDBACK_SHORT)
        v, t = evaluation.verdict, evaluation.timing
        self.store.record_event("feedback", {**self._key, "feedback_index": index,
                                             "calls_used": self.account.spend.calls,
                                             "source_hash": self.store.put_source(candidate.source), "verdict": v.kind})
        return Feedback(verdict=v.kind, message=_capped(v.message), failing_case=v.failing_case,
                        latency_ms=t.candidate_ms if t else None, speedup=t.speedup_vs_baseline if t else None,
                        speedup_ci=t.speedup_ci if t else None, traceback=_capped(v.traceback))

    def run_tests(self, candidate: Candidate, tests: str) -> Feedback:
        """The method's own test functions against a candidate, run by the sandboxed worker.
        Recorded in `test_runs` (with the tests' source), not in `feedback`: that table holds
        visible verdicts only, and a reviewer must be able to tell the two kinds apart."""
        with self._lock:
            self._spend_evaluation()
            index = self.n_test_runs
            self.n_test_runs += 1
        report = self.evaluator.run_tests(self.task.id, candidate.source, tests)
        self.store.record_event("test_runs", {**self._key, "test_run_index": index,
                                              "calls_used": self.account.spend.calls,
                                              "source_hash": self.store.put_source(candidate.source),
                                              "tests_hash": self.store.put_source(tests),
                                              "verdict": report.verdict.kind,
                                              "tests_passed": sum(t.passed for t in report.tests),
                                              "tests_total": len(report.tests)})
        v = report.verdict
        return Feedback(verdict=v.kind, message=_capped(v.message), failing_case=v.failing_case, latency_ms=None,
                        speedup=None, kind="tests", traceback=_capped(v.traceback),
                        tests=tuple(TestResult(t.name, t.passed, _capped(t.message)) for t in report.tests))

    def submit(self, candidate: Candidate) -> None:
        h = self.store.put_source(candidate.source)
        with self._lock:
            if h == self._submitted_hash:
                return
            self._submitted_hash = h
            self.store.record_event("submissions", {**self._key, "submission_index": self.n_submissions,
                                                    "calls_used": self.account.spend.calls,
                                                    "tokens_used": self.account.spend.total_tokens, "source_hash": h,
                                                    "evals_used": self.evaluations_used})
            self.n_submissions += 1

    # ------------------------------------------------------------------ runs
    def begin_run(self, independent: bool = True) -> None:
        """A new run starts, so the one before it finished: recorded, so that pass@k over runs
        is computed from declared runs rather than inferred from positions."""
        with self._lock:
            self.close_run()
            self.run_index += 1
            self._run_unrecorded = True
            self._run_independent = bool(independent)

    def close_run(self) -> None:
        """Mark the current run finished (the scheduler calls it when a method returns by itself)."""
        with self._lock:
            if self.run_index >= 0 and not self._run_unrecorded:
                self.store.end_run(self.account.method, self.account.task, self.account.repeat, self.run_index,
                                   self.account.spend.calls)


# Sealed context -> its unit, while the method runs (UnitContext.sealed() adds, release() removes).
# A plain dict, not a WeakKeyDictionary: a weak reference to the sealed object would hand a
# method a path back here (`ctx.__weakref__.__callback__` closes over the dictionary).
_UNITS: dict[SealedContext, UnitContext] = {}
_UNITS_LOCK = threading.Lock()


def _unit(ctx: SealedContext) -> UnitContext:
    try:
        return _UNITS[ctx]
    except KeyError:
        raise RuntimeError("this method context is closed: its unit has finished") from None


class SealedContext:
    """What a method holds: `vendor`, `answer_format` and the verbs of methods/base.py's
    MethodContext. See the module docstring for what it keeps out of reach."""

    __slots__ = ()

    @classmethod
    def _open(cls, unit: UnitContext) -> SealedContext:
        ctx = cls()
        with _UNITS_LOCK:
            _UNITS[ctx] = unit
        return ctx

    def _close(self) -> None:
        with _UNITS_LOCK:
            _UNITS.pop(self, None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the method context is read-only (cannot set {name!r})")

    def __repr__(self) -> str:
        return "<method context>"

    @property
    def vendor(self) -> str:
        return _unit(self).vendor

    @property
    def answer_format(self) -> str:
        return _unit(self).answer_format

    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            wants_code: bool = False) -> Completion:
        return _unit(self).ask(messages, temperature=temperature, role=role, max_tokens=max_tokens,
                               wants_code=wants_code)

    def example(self, query: str, by: str) -> str | None:
        return _unit(self).example(query, by)

    def propose(self, source: str) -> Candidate:
        return _unit(self).propose(source)

    def feedback(self, candidate: Candidate) -> Feedback:
        return _unit(self).feedback(candidate)

    def run_tests(self, candidate: Candidate, tests: str) -> Feedback:
        return _unit(self).run_tests(candidate, tests)

    def submit(self, candidate: Candidate) -> None:
        _unit(self).submit(candidate)

    def begin_run(self, independent: bool = True) -> None:
        _unit(self).begin_run(independent)

    def calls_used(self) -> int:
        return _unit(self).calls_used()

    def remaining(self) -> int:
        return _unit(self).remaining()

    def evaluations_left(self) -> int | None:
        return _unit(self).evaluations_left()
