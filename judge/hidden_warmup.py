"""A visible job's candidate process, once its verdict is sent, compiles the source's hidden cases
in the background, so the source's hidden job finds its kernels compiled.

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

Nothing it does is judged or read: its reply only says it is done, then it is closed. At most
`MAX_WARMING` per worker (an older one is closed when another would exceed it); each gets
`WARMUP_LIMIT_S`. `KMC_HIDDEN_WARMUP=0` turns it off.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from typing import Any

from bench.task import Task
from judge.job import Job
from judge.precompile import case_descriptions

WARMUP_ENV = "KMC_HIDDEN_WARMUP"
WARMUP_LIMIT_S = 30.0
"""How long a process may compile the hidden cases before it is closed (what it finished is kept)."""
MAX_WARMING = 1
"""Processes per worker compiling in the background: each holds a GPU context (memory) and a
few compile threads."""


def warmup_enabled(interpreter: bool) -> bool:
    from judge.candidate.precompile import enabled

    return not interpreter and os.environ.get(WARMUP_ENV, "1") != "0" and enabled(interpreter)


def worth_warming(job: Job, verdict: Any) -> bool:
    """A visible evaluation that passed: its source will be judged on the hidden cases (one
    that failed is mostly decided without a job, runners/savings.py)."""
    return not job.tests_job and job.case_set == "visible" and bool(getattr(verdict, "correct", False))


class HiddenWarmups:
    """A worker's candidate processes compiling their sources' hidden cases in the background."""

    def __init__(self, caches: Any, device: str, interpreter: bool) -> None:
        self.caches, self.device, self.interpreter = caches, device, interpreter
        self.warming: list[Any] = []
        self.started = 0

    def start(self, proc: Any, task: Task, source: str) -> bool:
        """`proc` (loaded with `source`, its last request answered) compiles the hidden cases
        from now on, and this object closes it. False, with `proc` left to the caller, where
        there is nothing to compile or it cannot be asked."""
        if not warmup_enabled(self.interpreter) or not getattr(proc, "cache", ""):
            return False
        cases = tuple(task.cases("hidden", self.interpreter)) + tuple(task.perf)
        described = case_descriptions(task, cases, self.device, self.interpreter)
        if not described or proc.unanswered is not None:
            return False
        self.reap()
        while len(self.warming) >= MAX_WARMING:
            self._close(self.warming.pop(0))
        self.caches.hide(proc, source)  # what it wrote so far stays visible; from here on, hidden only
        proc.deadline = time.monotonic() + WARMUP_LIMIT_S
        try:
            proc.send({"op": "compile", "cases": described})
        except Exception:  # noqa: BLE001 - lost before it began: closed like any other (hidden side)
            self._close(proc)
            return True
        self.warming.append(proc)
        self.started += 1
        return True

    def reap(self) -> int:
        """Processes done (their reply came) or past their limit closed, what they compiled
        kept. Returns how many are still compiling."""
        now = time.monotonic()
        for proc in list(self.warming):
            if proc.deadline <= now or _replied(proc):
                self.warming.remove(proc)
                self._close(proc)
        return len(self.warming)

    def close(self) -> None:
        for proc in self.warming:
            self._close(proc)
        self.warming.clear()

    @staticmethod
    def _close(proc: Any) -> None:
        with contextlib.suppress(Exception):
            proc.close()


def _replied(proc: Any) -> bool:
    try:
        return bool(select.select([proc.sock], [], [], 0)[0])
    except (OSError, ValueError):  # its socket is gone: nothing more will come
        return True
