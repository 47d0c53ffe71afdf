"""The executor protocol: what the scheduler needs from whatever runs the evaluation workers.

Two implementations: `runners.pool.LocalPool` (persistent workers on this machine) and
`runners.ray_executor.RayExecutor` (the same workers inside Ray actors). Both keep two lanes:
judging in parallel on many workers, and timing in one lane per GPU through that GPU's fair
gate (judge/gate.py), so no judging job can starve or disturb a measurement. Every call is
thread-safe and blocking; a worker's failure is a verdict, never an exception.
"""

from __future__ import annotations

from typing import Any, Protocol

from judge.candidate.internal_tests import InternalTestReport
from judge.candidate.verdict import Evaluation
from judge.policy import TimingPolicy


class Executor(Protocol):
    @property
    def size(self) -> int:
        """How many evaluations can run at once (the scheduler sizes its thread pool on it)."""
        ...

    def warm_up(self) -> None:
        """Start the workers now, in the background, so their imports overlap other work."""
        ...

    def layout(self) -> dict[str, Any]:
        """How evaluations run here, for config.json's `executor`: the kind of executor, judging
        workers (per device), timing lanes, whether the count was chosen or given, and why."""
        ...

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: TimingPolicy | None = None, timeout: float | None = None,
                 compile_through: str = "") -> Evaluation:
        """`compile_through`: a hint for the job's compile pass (judge/job.py `Job`), never
        its verdict."""
        ...

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

    def layout(self) -> dict[str, Any]:
        return {"kind": "replay", "workers": 0, "timing_lanes": 0, "chosen": "default",
                "why": "an exact replay answers every evaluation from the recorded run; nothing runs"}

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: TimingPolicy | None = None, timeout: float | None = None,
                 compile_through: str = "") -> Evaluation:
        raise RuntimeError("an exact replay runs no evaluation")

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        raise RuntimeError("an exact replay runs no evaluation")

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass
