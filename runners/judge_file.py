"""`cli.py eval` as a library call: judge one candidate file on one task.

The candidate goes to a one-worker pool like any candidate of a run (sandboxed, time-limited,
its own process), on the hidden cases by default; on a GPU a correct candidate is also timed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.registry import get_task, load_sources, resolve_sources
from judge.candidate.verdict import Evaluation
from judge.device import Target, default_device, detect_target
from judge.privileges import PrivilegeError
from runners.config import ConfigError
from runners.pool import LocalPool


@dataclass(frozen=True)
class FileVerdict:
    evaluation: Evaluation
    target: Target

    @property
    def correct(self) -> bool:
        return self.evaluation.verdict.correct

    @property
    def cases_run(self) -> int:
        """Cases the candidate was run on: those it passed plus the one that decided a failure
        (the judge's `cases_run` counts the cases passed before it stopped)."""
        v = self.evaluation.verdict
        return v.cases_run + (1 if v.failing_case is not None and not v.correct else 0)

    def to_json(self) -> dict[str, Any]:
        """The object `eval --json` prints."""
        v, timing = self.evaluation.verdict, self.evaluation.timing
        return {"verdict": v.kind, "failing_case": v.failing_case, "max_abs_err": v.max_abs_err,
                "max_rel_err": v.max_rel_err, "message": v.message, "traceback": v.traceback,
                "cases_run": self.cases_run,
                "cases_passed": v.cases_run,
                "cases_skipped": v.cases_skipped, "skip_reasons": list(v.skip_reasons),
                "timing": timing.to_json() if timing else None}


def judge_file(task_id: str, candidate: Path, case_set: str = "hidden", timeout: float | None = None,
               worker_user: str | None = None, device: str | None = None,
               sources: list[str] | None = None) -> FileVerdict:
    """`device`: "auto" or "cpu" [$KMC_FORCE_CPU's default]; `sources`: `ADAPTER:PATH` task
    sources [$KMC_TASK_SOURCES], loaded here and by the worker."""
    target = detect_target(force_cpu=(device or default_device()) == "cpu")
    task_sources = resolve_sources(sources)
    load_sources(task_sources, target.vendor)
    task = get_task(task_id)
    try:
        pool = LocalPool(target, workers=1, job_timeout=timeout, worker_user=worker_user, task_sources=task_sources)
    except PrivilegeError as exc:
        raise ConfigError(str(exc)) from None
    with pool:
        evaluation = pool.evaluate(task.id, task.complete_source(Path(candidate).read_text()), case_set,
                                   timing=not target.interpreter)
    return FileVerdict(evaluation, target)
