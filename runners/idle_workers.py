"""The pool's idle workers, handed out to waiting jobs most urgent first (runners/pool.py).

Why not first come, first served: a unit's feedback and own-test jobs are a chain (the method
waits for each verdict before its next model call), while the hidden jobs judged after a method
returns wait for nobody but their unit's end. First come, first served let a feedback job queue
behind a burst of another unit's hidden jobs (on an H200 every kind of job waited about 2 s for a
worker in the 7-task command), stretching every chain, and left the run's last seconds to a few
chains with most workers idle. Handing a freed worker to the most urgent waiting job, in arrival
order within an urgency, keeps the chains moving and leaves independent hidden work for the
gaps and the end, where it fills every worker. Nothing starves for good: a unit whose method
has returned waits for its hidden jobs and starts no new chain, so once the chains thin out the
hidden jobs get the workers.

The workers themselves go out first in, first out: on several GPUs the pool lists them a device
at a time in turn, so the first jobs spread over the devices.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import threading
from typing import Generic, TypeVar

WorkerT = TypeVar("WorkerT")

URGENT = 0
"""A job a method is waiting for: visible feedback, its own tests."""
DEFERRABLE = 1
"""A job nobody waits for but the unit's end: hidden judging after the method returned."""


class IdleWorkers(Generic[WorkerT]):
    """Idle workers and the jobs waiting for one: `take(urgency)` blocks until a worker is free
    and no more urgent (or equally urgent, earlier) job waits; `give_back` returns one."""

    def __init__(self) -> None:
        self._free: collections.deque[WorkerT] = collections.deque()
        self._waiting: list[tuple[int, int]] = []  # a heap of (urgency, arrival)
        self._arrivals = itertools.count()
        self._changed = threading.Condition()

    def give_back(self, worker: WorkerT) -> None:
        with self._changed:
            self._free.append(worker)
            self._changed.notify_all()

    def take(self, urgency: int = URGENT) -> WorkerT:
        with self._changed:
            ticket = (urgency, next(self._arrivals))
            heapq.heappush(self._waiting, ticket)
            try:
                while not (self._free and self._waiting[0] == ticket):
                    self._changed.wait()
            except BaseException:  # interrupted while waiting: a ticket left behind would block every later job
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self._changed.notify_all()
                raise
            heapq.heappop(self._waiting)
            worker = self._free.popleft()
            self._changed.notify_all()  # the next in line may find another worker free
            return worker

    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)
