"""Task and suite registry: built-in modules register at import; adapters register on load.

Unknown ids raise `UnknownTaskError` with the nearest known names, so a typo on the
command line becomes a one-line error rather than a KeyError traceback.
"""

from __future__ import annotations

import difflib

from bench.task import Task


class UnknownTaskError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its argument; a message reads better
        return str(self.args[0])


_TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    if task.id in _TASKS and _TASKS[task.id] is not task:
        raise ValueError(f"task id {task.id!r} registered twice")
    _TASKS[task.id] = task
    return task


def _near(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def get_task(task_id: str) -> Task:
    _load_builtin()
    try:
        return _TASKS[task_id]
    except KeyError:
        raise UnknownTaskError(f"unknown task {task_id!r}{_near(task_id, sorted(_TASKS))}") from None


def all_tasks() -> list[Task]:
    _load_builtin()
    return list(_TASKS.values())


def suite_names() -> list[str]:
    _load_builtin()
    names = {s for t in _TASKS.values() for s in t.suites}
    return sorted(names)


def suite_tasks(suite: str) -> list[Task]:
    _load_builtin()
    tasks = [t for t in _TASKS.values() if suite in t.suites]
    if not tasks:
        raise UnknownTaskError(f"unknown suite {suite!r}{_near(suite, suite_names())}; known: {', '.join(suite_names())}")
    return tasks


_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import bench.builtin  # noqa: F401  (registers tasks at import)
