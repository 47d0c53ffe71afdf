"""Evaluation with a cache: identical candidates are judged once per (task, case set, device).

The cache lives in the run store, so a resumed run reuses every verdict it already paid
for; an in-memory lock per key stops two concurrent units from judging the same source twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from judge.candidate.internal_tests import InternalTestReport, case_set_for
from judge.candidate.verdict import Evaluation, Verdict
from judge.device import Target
from judge.policy import FINAL_FULL, TimingPolicy
from record.store import source_hash
from runners.executor import Executor
from runners.savings import carried_failure, untimed_from_timed


class RunInterrupted(BaseException):
    """The run is stopping (Ctrl-C, or a fatal error in another unit): the unit ends here,
    unfinished, and nothing it was doing is recorded, so a resume redoes it exactly. A
    BaseException so that method code catching Exception cannot swallow it."""


class EvaluationStore(Protocol):
    def put_source(self, source: str) -> str: ...

    def evaluation(self, h: str, task: str, case_set: str, device_key: str, timed: bool = False) -> dict[str, Any] | None: ...

    def record_evaluation(self, h: str, task: str, case_set: str, device_key: str, evaluation: dict[str, Any],
                          timed: bool = False, phases: dict[str, float] | None = None) -> None: ...


class RecordedLookup(Protocol):
    def evaluation(self, h: str, task: str, case_set: str, device_key: str, timed: bool = False) -> dict[str, Any] | None: ...


SANITIZED_SUFFIX = "|sanitized"
"""On the device key of a timed evaluation judged under compute-sanitizer as well (`sanitize`,
NVIDIA only): the sanitizer can fail a candidate the plain judge passes, so the two verdicts
are different results and neither is reused for the other (a run resumed or replayed with the
option changed judges afresh)."""


class Evaluator:
    """`recorded`: a recorded run's evaluations (`compare --replay`); every evaluation is then
    answered from them, copied into this run's store, and nothing runs: an evaluation the
    recorded run never made is a ReplayMiss (exact or it stops, as for model calls)."""

    def __init__(self, executor: Executor, store: EvaluationStore, target: Target,
                 timing_policy: TimingPolicy | None = None, stopping: threading.Event | None = None,
                 recorded: RecordedLookup | None = None,
                 on_executed: Callable[[str, str, str, float], None] | None = None, sanitize: bool = False,
                 save_jobs: bool = True):
        """`on_executed(task, case_set, verdict, seconds)` hears of every job a worker ran (not of
        answers from the cache or the record): the scheduler's progress bar and log. `sanitize`:
        the executor runs timed evaluations under compute-sanitizer too (the pool's option of
        the same name); part of the cache key of those evaluations. `save_jobs`: hidden verdicts
        that earlier results decide are recorded without a job (runners/savings.py; False judges
        every one, for the test that both give the same verdicts)."""
        self.recorded = recorded
        self.replayed = 0
        self.sanitize = sanitize
        self.executor = executor
        self.stopping = stopping or threading.Event()
        self.store = store
        self.target = target
        self.timing_policy = timing_policy or TimingPolicy()
        self._locks: dict[tuple[str, ...], threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.executed = 0
        self._on_executed = on_executed
        self.save_jobs = save_jobs
        self.saved = 0  # hidden verdicts recorded from earlier results instead of a job (runners/savings.py)

    def _lock(self, key: tuple[str, ...]) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def _cached(self, source: str, task_id: str, case_set: str, device_key: str,
                compute: Callable[[], Any], timed: bool = False) -> dict[str, Any]:
        """The stored JSON of a result, computing and storing it at most once per key."""
        key = (self.store.put_source(source), task_id, case_set, device_key)
        with self._lock((*key, str(timed))):
            cached = self.store.evaluation(*key, timed=timed)
            if cached is not None:
                return cached
            if self.stopping.is_set():
                raise RunInterrupted()
            if self.recorded is not None:
                return self._replayed(key, timed)
            started = time.perf_counter()
            result = compute().to_json()
            if self.stopping.is_set():  # the worker may have been killed under it: not a verdict to keep
                raise RunInterrupted()
            self.executed += 1
            phases = result.pop("phases", None)  # stored beside the evaluation, never in it: reruns' JSON is equal
            self.store.record_evaluation(*key, result, timed=timed, phases=phases)
            if self._on_executed is not None:
                self._on_executed(task_id, case_set, str(result["verdict"]["kind"]), time.perf_counter() - started)
            return result

    def _replayed(self, key: tuple[str, str, str, str], timed: bool) -> dict[str, Any]:
        from modelio.replay import ReplayMiss

        assert self.recorded is not None
        result = self.recorded.evaluation(*key, timed=timed)
        if result is None:
            h, task, case_set, device = key
            raise ReplayMiss(f"the recorded run has no {'timed ' if timed else ''}evaluation of candidate {h[:12]} on "
                             f"{task} ({case_set}, {device}); an exact replay needs the same code and options "
                             "(--rejudge evaluates anew)")
        self.replayed += 1
        self.store.record_evaluation(*key, result, timed=timed)
        return result

    def judging_key(self, timed: bool) -> str:
        """The device key an evaluation is cached under: the device, and whether the sanitizer
        judged it too (timed evaluations on NVIDIA with `sanitize`)."""
        sanitized = timed and self.sanitize and self.target.vendor == "nvidia" and not self.target.interpreter
        return self.target.key + (SANITIZED_SUFFIX if sanitized else "")

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 protocol: str = FINAL_FULL) -> Evaluation:
        """`protocol`: the timing protocol (judge/policy.py): FINAL_FULL for final submissions,
        FEEDBACK_SHORT for visible feedback. Visible and hidden evaluations are cached under
        different case sets, so the two protocols never answer for each other."""
        timed = timing and not self.target.interpreter
        policy = self.timing_policy.for_protocol(protocol)

        def judge() -> Evaluation:
            decided = self.already_decided(task_id, source, case_set, timed) if self.save_jobs else None
            if decided is not None:
                self.saved += 1
                return decided
            return self.executor.evaluate(task_id, judged_source(task_id, source), case_set, timing=timed,
                                          timing_policy=policy,
                                          compile_through=self.visible_failure(task_id, source, case_set))

        return Evaluation.from_json(self._cached(source, task_id, case_set, self.judging_key(timed), judge,
                                                 timed=timed))

    def already_decided(self, task_id: str, source: str, case_set: str, timed: bool) -> Evaluation | None:
        """A hidden verdict that what this run judged before decides (runners/savings.py): a
        visible failure before or on the first case, or for the untimed job a timed one that
        passed. Never a pass that no hidden job gave."""
        if case_set != "hidden":
            return None
        from bench.registry import get_task

        h = source_hash(source)  # the key `_cached` stored it under, without writing it again
        if not timed:
            passed = untimed_from_timed(self.store.evaluation(h, task_id, "hidden", self.judging_key(True), timed=True))
            if passed is not None:
                return passed
        visible = get_task(task_id).visible
        if not visible:
            return None
        for stored in self._visible_evaluations(h, task_id):
            decided = carried_failure(stored, visible[0].name)
            if decided is not None:
                return decided
        return None

    def visible_failure(self, task_id: str, source: str, case_set: str) -> str:
        """For a hidden job, the case this source failed on in a visible run stored here, or "":
        its compile pass's hint (judge/job.py `Job.compile_through`). Read whether or not the
        savings are on, as it changes no verdict."""
        if case_set != "hidden":
            return ""
        for stored in self._visible_evaluations(source_hash(source), task_id):
            verdict = Verdict.from_json(stored["verdict"])
            if verdict.kind != "correct" and verdict.failing_case:
                return verdict.failing_case
        return ""

    def _visible_evaluations(self, h: str, task_id: str) -> list[dict[str, Any]]:
        """The stored visible evaluations of source hash `h`, timed first."""
        found = (self.store.evaluation(h, task_id, "visible", self.judging_key(timed), timed=timed)
                 for timed in (True, False))
        return [e for e in found if e]

    def run_tests(self, task_id: str, source: str, tests: str) -> InternalTestReport:
        """A method's own tests against a candidate, in the sandboxed worker; cached under the
        case set `internal:<hash of the tests>`, so a resumed run replays the report."""
        return InternalTestReport.from_json(self._cached(
            source, task_id, case_set_for(tests), self.target.key,
            lambda: self.executor.run_tests(task_id, judged_source(task_id, source), tests)))


def judged_source(task_id: str, source: str) -> str:
    """The candidate's file as the judge imports it: adapted tasks append the suite's own call
    of the code (its launcher or a launch) when the candidate does not define the entry point
    (Task.complete_source). The cache and the store keep the candidate's text as written."""
    from bench.registry import get_task

    return get_task(task_id).complete_source(source)
