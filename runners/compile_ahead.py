"""The compile-ahead lane: judge workers that judge nothing, compiling the kernels of evaluations
that wait for a judging worker (judge/compile_ahead.py says why, and what it does not change).

How: a job that finds no judging worker idle (runners/pool.py `_run_job`) is also handed here
(`CompileAhead.submit`) as a COMPILE_AHEAD job, queued oldest first; each lane worker takes the
next one still waiting, and the job's caller drops its entry (`Ahead.drop`) once a judging
worker has it, so a lane worker never starts on a job already being judged. One already
compiling goes on: the judging worker's own pass then compiles beside it, as without the lane,
and each compiled kernel lands in the source's cache whole, whichever finishes first
(judge/source_caches.py). The lane's replies decide nothing and are not kept; a lane worker
that times out or dies is restarted in the background, and one that cannot start ends the lane
(the judging goes on without it, as it would with the lane off).

`KMC_COMPILE_AHEAD`: lane workers per GPU (default 0, off).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field

from judge.compile_ahead import COMPILE_WORKER_ENV
from judge.job import COMPILE_AHEAD, EVALUATION, Job
from runners.worker_process import WORKER_LOST, WorkerProcess, WorkerStartError

log = logging.getLogger("kmc.pool")

COMPILE_AHEAD_ENV = "KMC_COMPILE_AHEAD"
AHEAD_LIMIT_S = 60.0
"""A compile-ahead job's time limit (the pass itself stops starting cases after 30 s:
judge/candidate/precompile.py `PASS_LIMIT_S`)."""
MAX_PER_DEVICE = 4
SLOT_BASE = 100
"""Lane workers' slots (their log files, worker-SLOT.log) start here, apart from the judging workers'."""


def lane_workers_per_device(value: str | None = None) -> int:
    """`KMC_COMPILE_AHEAD` read: 0 to `MAX_PER_DEVICE`; unset, empty or not a whole number in
    that range: 0 (with a line in the log for the last)."""
    text = (os.environ.get(COMPILE_AHEAD_ENV, "") if value is None else value).strip()
    if not text:
        return 0
    if text.isdigit() and 0 <= int(text) <= MAX_PER_DEVICE:
        return int(text)
    log.warning("%s=%r is not a whole number from 0 to %d; the compile-ahead lane is off", COMPILE_AHEAD_ENV, text,
                MAX_PER_DEVICE)
    return 0


def worth_compiling_ahead(job: Job) -> bool:
    """An evaluation (not a method's tests, not a retry alone): its pass is what the lane runs."""
    return job.kind == EVALUATION and not job.alone


@dataclass
class Ahead:
    """One job's entry in the lane: waiting, then taken by a lane worker (`claim`) or dropped by
    the job's caller once a judging worker has the job (`drop`), whichever comes first."""

    job: Job
    state: str = "waiting"  # -> "compiling" -> "done", or -> "dropped"
    overlapped: bool = False  # a judging worker took the job while a lane worker compiled it
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def claim(self) -> bool:
        with self._lock:
            if self.state != "waiting":
                return False
            self.state = "compiling"
            return True

    def drop(self) -> None:
        with self._lock:
            if self.state == "waiting":
                self.state = "dropped"
            self.overlapped = self.state == "compiling"

    def finish(self) -> None:
        with self._lock:
            self.state = "done"


@dataclass
class LaneStats:
    submitted: int = 0
    compiled: int = 0  # compile-ahead jobs a lane worker finished
    overlapped: int = 0  # of those, jobs a judging worker took before the lane's pass ended (both compiled)
    dropped: int = 0  # entries a judging worker took before any lane worker did
    failed: int = 0  # lane jobs lost to a lane worker's timeout, death or broken reply
    seconds: float = 0.0  # lane workers' seconds on jobs

    def line(self) -> str:
        return (f"compile-ahead lane: {self.submitted} jobs handed over, {self.compiled} compiled ahead "
                f"({self.seconds:.1f} worker-seconds; {self.overlapped} of them judged before the lane's pass ended), "
                f"{self.dropped} taken by a judging worker first, "
                f"{self.failed} lost")


class CompileAhead:
    """The lane: `workers` (WorkerProcess, not yet started), one thread each."""

    def __init__(self, workers: list[WorkerProcess]) -> None:
        self.workers = workers
        self.stats = LaneStats()
        self._queue: queue.Queue[Ahead | None] = queue.Queue()
        self._lock = threading.Lock()
        self.closed = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """The lane's workers started, each on a thread of its own (once; the pool's `warm_up`,
        else the first `submit`): as with the judging workers, nothing starts before."""
        with self._lock:
            if self._threads or self.closed:
                return
            self._threads = [threading.Thread(target=self._serve, args=(w,), name=f"compile-ahead-{w.slot}",
                                              daemon=True) for w in self.workers]
        for t in self._threads:
            t.start()

    @classmethod
    def beside(cls, judging: list[WorkerProcess], per_device: int) -> CompileAhead | None:
        """`per_device` lane workers for each device the `judging` workers are bound to, made as
        they are (same gate, environment and task sources) but told to compile only; None for 0."""
        if per_device < 1 or not judging:
            return None
        first: dict[str | None, WorkerProcess] = {}
        for w in judging:
            first.setdefault(w.device, w)
        models = [m for m in first.values() for _ in range(per_device)]
        return cls([m.sibling(SLOT_BASE + k, {COMPILE_WORKER_ENV: "1"}) for k, m in enumerate(models)])

    def submit(self, job: Job) -> Ahead | None:
        """`job` queued for a lane worker, where it is worth it (`worth_compiling_ahead`)."""
        if self.closed or not worth_compiling_ahead(job):
            return None
        self.start()
        ahead = Ahead(job.with_(kind=COMPILE_AHEAD, references=(), prime_references=False, timeout=AHEAD_LIMIT_S))
        with self._lock:
            self.stats.submitted += 1
        self._queue.put(ahead)
        return ahead

    def _serve(self, worker: WorkerProcess) -> None:
        try:
            worker.ensure_started()  # the lane's workers start beside the judging ones
        except WorkerStartError as exc:
            log.warning("a compile-ahead worker could not start (%s); the lane goes on without it", exc)
            return
        while True:
            ahead = self._queue.get()
            if ahead is None:
                return
            if not ahead.claim():
                with self._lock:
                    self.stats.dropped += 1
                continue
            started = time.perf_counter()
            ok = True
            try:
                worker.run(ahead.job, 2 * AHEAD_LIMIT_S + 30.0)
            except WorkerStartError as exc:
                log.warning("a compile-ahead worker could not start again (%s); the lane goes on without it", exc)
                return
            except WORKER_LOST as exc:
                ok = False
                if not worker.closed:
                    log.warning("compile-ahead worker restarted after a job of %s: %s", ahead.job.task, str(exc)[:300])
                    worker.kill()
            finally:
                ahead.finish()
            with self._lock:
                self.stats.compiled += ok
                self.stats.overlapped += ok and ahead.overlapped
                self.stats.failed += not ok
                self.stats.seconds += time.perf_counter() - started

    def close(self) -> None:
        """Every lane worker stopped (a job it runs ends with it); the counts to the log."""
        with self._lock:
            self.closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        for w in self.workers:
            with contextlib.suppress(Exception):
                w.closed = True
                w.kill()
        if self.stats.submitted:
            log.info(self.stats.line())
