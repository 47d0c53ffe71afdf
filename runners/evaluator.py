"""Evaluation with a cache: identical candidates are judged once per (task, case set, device).

The cache lives in the run store, so a resumed run reuses every verdict it already paid
for; an in-memory lock per key stops two concurrent units from judging the same source twice.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from runners.device import Target
from runners.verdict import Evaluation


class EvaluationStore(Protocol):
    def put_source(self, source: str) -> str: ...

    def evaluation(self, h: str, task: str, case_set: str, device_key: str) -> dict[str, Any] | None: ...

    def record_evaluation(self, h: str, task: str, case_set: str, device_key: str, evaluation: dict[str, Any]) -> None: ...


class Executor(Protocol):
    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: dict[str, Any] | None = None, timeout: float | None = None) -> Evaluation: ...


class Evaluator:
    def __init__(self, executor: Executor, store: EvaluationStore, target: Target,
                 timing_policy: dict[str, Any] | None = None):
        self.executor = executor
        self.store = store
        self.target = target
        self.timing_policy = timing_policy or {}
        self._locks: dict[tuple[str, ...], threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.executed = 0

    def _lock(self, key: tuple[str, ...]) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False) -> Evaluation:
        timed = timing and not self.target.interpreter
        device_key = self.target.key + ("|timed" if timed else "")
        h = self.store.put_source(source)
        key = (h, task_id, case_set, device_key)
        with self._lock(key):
            cached = self.store.evaluation(*key)
            if cached is not None:
                return Evaluation.from_json(cached)
            evaluation = self.executor.evaluate(task_id, source, case_set, timing=timed,
                                                timing_policy=self.timing_policy)
            self.executed += 1
            self.store.record_evaluation(*key, evaluation.to_json())
            return evaluation
