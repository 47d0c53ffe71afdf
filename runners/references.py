"""The run's reference timings, kept by the pool for its workers (judge/baselines.py says why
one set per run rather than one per worker).

The pool attaches a task's timings to every job of the short feedback protocol and keeps
what each reply says its worker measured (a first measurement, or a fresh one after drift,
which replaces the one before). A task's first timed job also measures the references
whatever its candidate's verdict, and the task's other timed jobs wait for it (`first_of`),
so they take its measurement instead of each taking their own at once; after it nothing
waits.
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
        self._opened: dict[str, threading.Event] = {}

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

    @contextlib.contextmanager
    def first_of(self, task_id: str) -> Iterator[bool]:
        """Around a feedback-timing job of `task_id`: yields True for the run's first such job of
        the task, which the pool asks to measure the task's references whatever its verdict
        (`prime_references`), and holds every other one back until that job has returned, so
        they are sent with its measurement; once it has, nothing waits here any more."""
        with self._lock:
            opened = self._opened.get(task_id)
            first = opened is None
            if opened is None:
                opened = self._opened[task_id] = threading.Event()
        if not first:
            opened.wait()
            yield False
            return
        try:
            yield True
        finally:
            opened.set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._timings)
