"""How many judge jobs a `compare` run asks for, without judging anything: the simulated model
and the real methods, scheduler, ledger and evaluation cache, with a stand-in judge that knows
the simulated model's bugs (a source carrying any breaking mutation of its task is wrong, else
correct; timed sources get a made-up speedup from their tunings).

Why: the main job's wall time on a GPU is its judge jobs times their cost over the workers, and
the distinct sources a budget produces (the cache answers repeats) are what a GPU session has to
plan for. The counts are exact for the simulated model only as far as feedback wording does not
matter (the stand-in's messages are not the judge's); a real model's counts differ.

    python benchmarks/estimate_compare_load.py --budget 100 --suite full
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.registry import get_task  # noqa: E402
from judge.candidate import verdict as jv  # noqa: E402
from judge.candidate.internal_tests import InternalTestReport  # noqa: E402
from judge.candidate.verdict import CaseTiming, Evaluation, Timing, Verdict  # noqa: E402
from judge.device import Target  # noqa: E402
from modelio.simulated import Mutation, generic_mutations  # noqa: E402

STAND_IN_GPU = Target("nvidia", False, "stand-in GPU (nothing runs)", 1)


def carries(source: str, m: Mutation, expert: str) -> bool:
    """Whether `source` holds mutation `m` of `expert`: its replacement text is there and either
    new (the expert has none) or in place of one of the original's occurrences (a replacement
    that is a prefix of the original, a dropped colon, is in every source; an original that occurs
    several times, `tl.load(`, is still there after one is replaced)."""
    return m.replace in source and (m.replace not in expert or source.count(m.find) < expert.count(m.find))


class BugAwareExecutor:
    """An Executor that judges by the task's mutation list and counts what it was asked."""

    size = 4

    def __init__(self) -> None:
        self.jobs: collections.Counter[tuple[str, str, bool]] = collections.Counter()
        self.sources: dict[str, set[str]] = collections.defaultdict(set)
        self.verdicts: list[str] = []  # the stand-in's verdict of every evaluation, in order
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        pass

    def layout(self) -> dict[str, Any]:
        return {"kind": "stand-in", "workers": self.size, "timing_lanes": 1, "chosen": "given",
                "why": "estimate_compare_load.py: nothing is judged"}

    def _verdict(self, task_id: str, source: str) -> tuple[Verdict, int]:
        """By what the simulated model wrote into it: a breaking mutation it carries decides.
        (Before, a generic mutation whose replacement is a prefix of its original text, a
        dropped colon, was found in every source: every source was a syntax error.)"""
        task = get_task(task_id)
        expert = task.baseline_source()
        for m in generic_mutations(expert):
            if carries(source, m, expert):
                return Verdict("compile_error" if m.kind == "compile_error" else "syntax_error", m.kind), 0
        for m in task.mutations:
            if m.breaks and carries(source, m, expert):
                return Verdict("wrong_result", f"stand-in: {m.kind}", "visible-0"), 0
        tunings = sum(1 for m in task.mutations if not m.breaks and m.replace in source)
        return Verdict("correct", "", cases_run=1, kernel_launched=True), tunings

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: Any = None, timeout: float | None = None, compile_through: str = "") -> Evaluation:
        verdict, tunings = self._verdict(task_id, source)
        with self._lock:
            self.jobs[(task_id, case_set, timing)] += 1
            self.verdicts.append(verdict.kind)
            self.sources[task_id].add(source)
        if not (timing and verdict.kind == "correct"):
            return Evaluation(verdict, None)
        speed = 1.0 + 0.1 * tunings
        case = CaseTiming("perf-0", (1.0 / speed,) * 5, (1.0,) * 5)
        return Evaluation(verdict, Timing((case,), speedup_vs_baseline=speed, speedup_ci=(speed * 0.97, speed * 1.03),
                                          candidate_ms=1.0 / speed))

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        with self._lock:
            self.jobs[(task_id, "internal", False)] += 1
        ok = self._verdict(task_id, source)[0].kind == "correct"
        return InternalTestReport.from_outcomes((jv.TestOutcome("test_stand_in", ok, "" if ok else "stand-in"),))

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def main() -> int:
    from modelio.simulated import SimulatedModel
    from runners.compare import CompareRun
    from runners.config import CompareConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--suite", default="full")
    parser.add_argument("--tasks", default=None, help="comma-separated task ids (overrides --suite)")
    parser.add_argument("--methods", default="direct,reflexion,geak")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    config = CompareConfig(budget=args.budget, methods=args.methods.split(","), suite=args.suite,
                           tasks=args.tasks.split(",") if args.tasks else None, seed=args.seed, device="auto")
    executor = BugAwareExecutor()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run = CompareRun(config, Path(tmp), SimulatedModel(), STAND_IN_GPU, executor=executor)
        try:
            run.run()
        finally:
            run.close()
    verdicts = collections.Counter(executor.verdicts)
    by_kind: collections.Counter[str] = collections.Counter()
    for (_, case_set, timed), n in executor.jobs.items():
        by_kind[f"{case_set.split(':')[0]}{' timed' if timed else ''}"] += n
    out = {"budget": args.budget, "suite": args.suite, "tasks": args.tasks, "methods": args.methods,
           "seed": args.seed, "jobs": sum(executor.jobs.values()), "jobs_by_kind": dict(by_kind),
           "verdicts": dict(verdicts),
           "distinct_sources": sum(len(s) for s in executor.sources.values()),
           "tasks_seen": len(executor.sources), "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
