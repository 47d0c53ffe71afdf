"""Where an evaluation's time goes: seconds per phase, measured where the work happens.

The worker times what it does (`compile`: writing and importing the candidate, which is where
a syntax or compile error shows; `correctness`: the oracle on the case set, or a method's own
tests; `timing`: the perf-case check and the timing protocol, on a GPU only); the pool adds
`queue` (waiting for an idle worker). The parent stores them beside the evaluation
(results/store.py, one column each), and `report` sums them per method and phase, so a slow
run can be told apart: judging, timing or waiting.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

PHASES = ("queue", "compile", "correctness", "timing")


class PhaseClock:
    """Seconds per phase of one job; a phase entered twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        assert phase in PHASES, phase
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start
