"""The executor protocol: what the scheduler needs from whatever runs the evaluation workers.

Two implementations: `runners.pool.LocalPool` (persistent workers on this machine) and
`runners.ray_executor.RayExecutor` (the same workers inside Ray actors). Every call is
thread-safe and blocking; a worker's failure is a verdict, never an exception.
"""

from __future__ import annotations

from typing import Protocol

from judge.internal_tests import InternalTestReport
from judge.policy import TimingPolicy
from judge.verdict import Evaluation


class Executor(Protocol):
    @property
    def size(self) -> int:
        """How many evaluations can run at once (the scheduler sizes its thread pool on it)."""
        ...

    def warm_up(self) -> None:
        """Start the workers now, in the background, so their imports overlap other work."""
        ...

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: TimingPolicy | None = None, timeout: float | None = None) -> Evaluation: ...

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport: ...

    def abort(self) -> None:
        """Kill every worker now (a run that is stopping); in-flight calls return at once."""
        ...

    def close(self) -> None: ...


class NothingRuns:
    """The executor of an exact replay (`compare --replay` without `--rejudge`): every
    evaluation comes from the recorded run (runners/evaluator.py), so no worker starts and no
    GPU is touched; a call here means the replay asked for something it should have found."""

    size = 4  # units replay concurrently; nothing waits on a worker

    def warm_up(self) -> None:
        pass

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: TimingPolicy | None = None, timeout: float | None = None) -> Evaluation:
        raise RuntimeError("an exact replay runs no evaluation")

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        raise RuntimeError("an exact replay runs no evaluation")

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass
