"""A passing visible or own-test job's candidate process, once its verdict is made, compiles the
source's hidden cases in the background, so the source's hidden job finds its kernels compiled.

Why: every candidate that passes its visible cases is judged on the hidden cases later (at its
unit's end), and those cases need specializations the visible ones did not (sizes past block
caps, other dtypes and layouts). Their compiles were the largest part of a hidden job: on an
H100 the 7-task command's hidden jobs spent 0.96 s each in the compile pass against 0.51 s judging,
on a worker that a queue of jobs waited for. The process that judged the visible cases has the
source imported and its visible kernels in memory, and the CPU was two thirds idle, so it goes on
with the compile pass on the hidden cases (judge/precompile.py: layouts only, no GPU work, no
ticket) while its worker takes the next job. What it compiles goes back to the source's hidden
side (judge/source_caches.py `SourceCaches.hide`), which only processes that saw hidden cases are
lent: nothing it writes after seeing them can reach a feedback or own-test process of the source.

Nothing it does is judged or read: its reply only says it is done, then it is closed (a thread
looks every `REAP_EVERY_S`, so what it compiled reaches the source's cache while the worker
judges on). At most `MAX_WARMING` per worker, one per source; each gets `WARMUP_LIMIT_S`.

Off by default (`KMC_HIDDEN_WARMUP=1` turns it on): its first version, on an H100, left the
7-task command's hidden compile pass where it was (1.15 and 0.95 s a job against 1.06 s off;
wall 82.8 and 89.5 s against 82.7 s). That version killed a process still compiling whenever
its worker's next passing job came (one at a time) and collected finished ones only when the
worker's next job began; this one starts no new process at the cap and collects from a thread.
On an H100 (session 27) it did nothing at first either: every warm-up's pass failed on its cases
(a carried kernel's function could not compile a new specialization: judge/candidate/precompile.py
`carry_compiled_kernels`, fixed). Since the fix a warmed source's hidden job compiles nothing
(softmax's expert: the warm-up compiled 30 kernels in 2.1 s, its hidden job's pass wrote none),
but in the 7-task command about half the hidden jobs' sources were warmed: the hidden pass took
0.59 s against 0.68 s off, the wall 80.9 s against 81.9 s, within the noise. Each warm-up leaves
a `warmup` step line (`_record`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import threading
import time
from typing import Any

from bench.task import Task
from judge.job import Job
from judge.phases import record_steps
from judge.precompile import cache_entries, case_descriptions, entries_added, reported_counts

WARMUP_ENV = "KMC_HIDDEN_WARMUP"
WARMUP_LIMIT_S = 30.0
"""How long a process may compile the hidden cases before it is closed (what it finished is kept)."""
MAX_WARMING = 2
"""Processes per worker compiling in the background: each holds a GPU context (memory) and a
few compile threads."""
REAP_EVERY_S = 0.25


def warmup_enabled(interpreter: bool) -> bool:
    from judge.candidate.precompile import enabled

    return not interpreter and os.environ.get(WARMUP_ENV, "0") == "1" and enabled(interpreter)


def worth_warming(job: Job, verdict: Any) -> bool:
    """A visible evaluation, or a method's own tests, that passed: its source will be judged on
    the hidden cases (one that failed its visible cases is mostly decided without a job,
    runners/savings.py). The verdict is made before the process sees a hidden case."""
    return (job.tests_job or job.case_set == "visible") and bool(getattr(verdict, "correct", False))


class HiddenWarmups:
    """A worker's candidate processes compiling their sources' hidden cases in the background."""

    def __init__(self, caches: Any, device: str, interpreter: bool) -> None:
        self.caches, self.device, self.interpreter = caches, device, interpreter
        self.warming: list[Any] = []
        self.sources: set[str] = set()  # the sources handed over on this worker: each once
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    def start(self, proc: Any, task: Task, source: str) -> bool:
        """`proc` (loaded with `source`, its last request answered) compiles the hidden cases
        from now on, and this object closes it. False, with `proc` left to the caller, where
        it is off, there is nothing to compile, the source was handed over before, the cap is
        reached, or `proc` cannot be asked."""
        if not warmup_enabled(self.interpreter) or not getattr(proc, "cache", "") or proc.unanswered is not None:
            return False
        key = hashlib.sha256(source.encode()).hexdigest()
        if key in self.sources or self.reap() >= MAX_WARMING:
            return False
        cases = tuple(task.cases("hidden", self.interpreter)) + tuple(task.perf)
        described = case_descriptions(task, cases, self.device, self.interpreter)
        if not described:
            return False
        self.sources.add(key)
        self.caches.hide(proc, source)  # what it wrote so far stays visible; from here on, hidden only
        proc.warm_since = (time.perf_counter(), cache_entries(proc.cache) or set())
        proc.deadline = time.monotonic() + WARMUP_LIMIT_S
        try:
            proc.send({"op": "compile", "cases": described})
        except Exception:  # noqa: BLE001 - lost before it began: closed like any other (hidden side)
            self._close(proc)
            return True
        with self._lock:
            self.warming.append(proc)
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap_until_closed, name="hidden-warmups", daemon=True)
            self._reaper.start()
        return True

    def reap(self) -> int:
        """Processes done (their reply came) or past their limit closed, what they compiled
        kept. Returns how many are still compiling."""
        now = time.monotonic()
        with self._lock:
            done = [p for p in self.warming if p.deadline <= now or _replied(p)]
            self.warming = [p for p in self.warming if p not in done]
            left = len(self.warming)
        for proc in done:
            _record(proc)
            self._close(proc)
        return left

    def close(self) -> None:
        self._stop.set()
        if self._reaper is not None:
            self._reaper.join(timeout=5)
        with self._lock:
            warming, self.warming = self.warming, []
        for proc in warming:
            self._close(proc)

    def _reap_until_closed(self) -> None:
        while not self._stop.wait(REAP_EVERY_S):
            self.reap()

    @staticmethod
    def _close(proc: Any) -> None:
        with contextlib.suppress(Exception):
            proc.close()


def _record(proc: Any) -> None:
    """A finished warm-up's line among the job steps (judge/phases.py `record_steps`, kind
    `warmup`): its seconds, the pass's counts as its process replied them, and `written`,
    counted here in its folder: what the source's hidden job will find compiled. Only counts,
    for the record; a process that did not reply gets `lost`."""
    since, before = getattr(proc, "warm_since", (time.perf_counter(), set()))
    try:
        if proc.unanswered is not None and _replied(proc):
            reply, _ = proc.receive()
            report = reported_counts(reply.get("pass"))
        else:
            report = {"lost": "closed at its limit, before its reply"}
    except Exception:  # noqa: BLE001 - a process that died or sent nonsense: nothing to count
        report = {"lost": "no reply"}
    report["written"] = entries_added(proc.cache, before)
    record_steps({"kind": "warmup", "wall": time.perf_counter() - since, "compile_pass": report})


def _replied(proc: Any) -> bool:
    try:
        return bool(select.select([proc.sock], [], [], 0)[0])
    except (OSError, ValueError):  # its socket is gone: nothing more will come
        return True
