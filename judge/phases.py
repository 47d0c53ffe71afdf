"""Where an evaluation's time goes: seconds per phase, measured where the work happens.

The worker times what it does (`start`: waiting for the candidate's process to be ready, the
spare forked ahead or a fresh one; `compile`: writing and importing the candidate, which is where
a syntax or compile error shows; `correctness`: the oracle on the case set, or a method's own
tests; `timing`: the perf-case check and the timing protocol, on a GPU only; `gate`: waiting at the
GPU's fair gate, judge/gate.py, for a timer ahead or, as a timer, for the judging jobs on the
GPU); the pool adds `queue` (waiting for an idle worker, or for one still starting), `retry` (an
attempt lost to a GPU out-of-memory error beside other workers, judged again alone;
runners/pool.py) and `other` (the seconds the worker had the job beyond its named phases:
messages, bookkeeping; `PhaseClock.step` names parts of a job apart from the phases, for
diagnosis). A phase entered inside another is counted in the inner one only, so the phases add
up to the job. The parent stores them beside the evaluation (record/store.py, one column each),
and `report` sums them per method and phase, so a slow run can be told apart: judging, timing or
waiting.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PHASES = ("queue", "start", "compile", "correctness", "timing", "gate", "retry", "other")

STEPS_ENV = "KMC_JOB_STEPS"
"""A folder: each judge worker appends a line per job there (`record_steps`), its phases, the
named steps inside them and its own wall time. A diagnostic (benchmarks/bench_compare_gpu.py
--steps): the store keeps phases only."""


class PhaseClock:
    """Seconds per phase of one job; a phase entered twice adds up, and a second spent in a
    phase nested inside another (waiting at the gate during timing) counts for the inner one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.steps: dict[str, float] = {}  # seconds of named steps, inside phases or between them
        self._nested: list[float] = []  # per open phase: seconds spent in phases inside it

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        assert phase in PHASES, phase
        start = time.perf_counter()
        self._nested.append(0.0)
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[phase] = self.seconds.get(phase, 0.0) + elapsed - self._nested.pop()
            if self._nested:
                self._nested[-1] += elapsed

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Seconds of a named step, kept apart from the phases (it may lie inside one, or
        outside all): which part of a phase, or of `other`, a job's time went to."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.steps[name] = self.steps.get(name, 0.0) + time.perf_counter() - start


def record_steps(line: dict[str, Any]) -> None:
    """One job's line in `$KMC_JOB_STEPS/steps-<pid>.jsonl`, when that is set; nothing else.
    Written by the judge worker only, never from candidate code's process."""
    folder = os.environ.get(STEPS_ENV)
    if not folder:
        return
    with contextlib.suppress(OSError), open(Path(folder) / f"steps-{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


def process_age() -> float:
    """Seconds since this process started (Linux: its start in /proc against the boot clock;
    0.0 elsewhere). For the worker's start line (`record_steps`): its imports happen before
    any clock of its own could start."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in clock ticks since boot
        return round(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 3)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
