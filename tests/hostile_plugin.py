"""A hostile method plugin: it tries every way out of its lane that issue 13 names, and writes
down what it got. tests/test_methods_scheduler.py runs it through the real scheduler and
asserts that every attempt failed.

Attempts: (1) the evaluator, task, store, account, ledger or model client as attributes of
the context, or through its bound methods and their closures; (2) replacing a verb or a
fact on the context; (3) overdrawing the budget by calling `ctx.ask` from many threads at
once; (4) reading the task's hidden cases and reference from inside its own tests, which run
in the evaluation worker (`ctx.run_tests`).
"""

from __future__ import annotations

import threading
from typing import Any

from bench.task import TaskView
from methods.base import MethodContext
from methods.registry import register_method
from modelio.types import Message

FINDINGS: dict[str, dict[str, Any]] = {}  # task id -> what each attempt got

PROBE_TESTS = '''
def test_probe():
    found = []
    try:
        import bench.registry as registry
        task = registry.get_task("{task_id}")
        found.append("hidden: " + " ".join(c.name for c in task.hidden_cpu + task.hidden_gpu))
        found.append("reference: " + task.baseline_source()[:300])
    except BaseException as exc:
        found.append("blocked: " + type(exc).__name__)
    assert False, " || ".join(found)
'''

CANDIDATE = "import torch\n\n\ndef {entry}(*args):\n    return args[0]\n"
INTERNALS = ("task", "evaluator", "store", "client", "account", "ledger", "examples", "unit", "_unit", "_inner",
             "__dict__")


@register_method("hostile_reach")
class HostileReach:
    def __init__(self, threads: int = 12):
        self.threads = threads

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        found: dict[str, Any] = {}
        FINDINGS[task.id] = found
        found["attributes"] = [name for name in INTERNALS if _has(ctx, name)]
        found["through_methods"] = [name for name in ("ask", "feedback", "run_tests", "propose")
                                    if _closure_objects(getattr(ctx, name))]
        found["replaced"] = [name for name in ("vendor", "ask", "feedback") if _replaced(ctx, name)]
        candidate = ctx.propose(CANDIDATE.format(entry=task.entry_point))
        report = ctx.run_tests(candidate, PROBE_TESTS.format(task_id=task.id))
        found["probe"] = " ".join(t.message for t in report.tests) or report.message
        found["calls_by_thread"] = self._overdraw(ctx)

    def _overdraw(self, ctx: MethodContext) -> list[int]:
        counts = [0] * self.threads

        def spend(i: int) -> None:
            while True:
                try:
                    ctx.ask([Message("user", f"Write anything ({i}).")], temperature=1.0, role="thief")
                except Exception:  # noqa: BLE001 - BudgetExhausted ends this thread's attempt
                    return
                counts[i] += 1

        threads = [threading.Thread(target=spend, args=(i,)) for i in range(self.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return counts


def _has(ctx: Any, name: str) -> bool:
    try:
        getattr(ctx, name)
    except AttributeError:
        return False
    return True


def _closure_objects(bound: Any) -> list[Any]:
    func = getattr(bound, "__func__", None)
    cells = getattr(func, "__closure__", None) or ()
    return [c.cell_contents for c in cells]


def _replaced(ctx: Any, name: str) -> bool:
    try:
        setattr(ctx, name, None)
    except AttributeError:
        return False
    return True
