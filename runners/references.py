"""The run's reference timings, kept by the pool for its workers (judge/baselines.py says why
one set per run rather than one per worker).

The pool attaches a task's timings to every job of the short feedback protocol and keeps
what each reply says its worker measured (a first measurement, or a fresh one after drift,
which replaces the one before). Until a task has any, its timed jobs go one at a time
(`first_of`): the first measures the references and the others, sent after it returns, take
its measurement instead of each taking their own at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from judge.baselines import BaselineKey, Shared

log = logging.getLogger(__name__)


class RunReferences:
    def __init__(self) -> None:
        self._timings: dict[BaselineKey, Shared] = {}
        self._lock = threading.Lock()
        self._first: dict[str, threading.Lock] = {}

    def of(self, task_id: str) -> list[dict[str, Any]]:
        """The task's timings as a job carries them."""
        with self._lock:
            return [s.to_json() for k, s in self._timings.items() if k.task == task_id]

    def keep(self, measured: Any) -> int:
        """What a reply says its worker measured; returns how many were kept. A malformed entry
        is logged and left out: the worker is the judge's side, so this is a bug, not an attack."""
        kept = 0
        for entry in measured if isinstance(measured, list) else ():
            try:
                shared = Shared.from_json(entry)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("a reference timing from a worker was left out: %s", exc)
                continue
            with self._lock:
                self._timings[shared.key] = shared
            kept += 1
        return kept

    def known(self, task_id: str) -> bool:
        with self._lock:
            return any(k.task == task_id for k in self._timings)

    @contextlib.contextmanager
    def first_of(self, task_id: str) -> Iterator[None]:
        """Held around a timed job of a task the run has no timings of yet: one such job at a
        time, and none once the first has brought its measurement back."""
        if self.known(task_id):
            yield
            return
        with self._lock:
            lock = self._first.setdefault(task_id, threading.Lock())
        with lock:
            yield

    def __len__(self) -> int:
        with self._lock:
            return len(self._timings)
