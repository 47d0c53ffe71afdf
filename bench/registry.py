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

SOURCES_ENV = "KMC_TASK_SOURCES"
"""Extra task sources, `ADAPTER:PATH` entries separated by `;` (e.g.
`geak-eval:/data/GEAK-eval;kernelbench:/data/KernelBench/KernelBench/level1`). Every process
that looks tasks up by id loads them, the evaluation workers included (the pool passes
`KMC_*` variables through), so adapted tasks are judged like built-in ones."""

_SOURCE_REPORTS: dict[str, object] = {}


class TaskSourceError(UnknownTaskError):
    """A task source that cannot be loaded: unknown adapter, missing folder."""


def parse_sources(value: str) -> list[tuple[str, str]]:
    out = []
    for entry in value.split(";"):
        entry = entry.strip()
        if not entry:
            continue
        adapter, sep, path = entry.partition(":")
        if not sep or not path:
            raise TaskSourceError(f"task source {entry!r} is not ADAPTER:PATH")
        out.append((adapter.strip(), path.strip()))
    return out


def _load_source(adapter: str, path: str) -> object:
    key = f"{adapter}:{path}"
    if key not in _SOURCE_REPORTS:
        from bench.adapters import AdapterError, load_source

        try:
            report = load_source(adapter, path)
        except AdapterError as exc:
            raise TaskSourceError(str(exc)) from None
        for task in report.tasks:
            register_task(task)
        _SOURCE_REPORTS[key] = report
    return _SOURCE_REPORTS[key]


def add_sources(specs: list[str]) -> list[object]:
    """Load `ADAPTER:PATH` sources now and export them in `KMC_TASK_SOURCES`, so worker
    processes started afterwards can look the adapted tasks up too. Returns the adapters'
    reports (task counts and skip reasons)."""
    import os
    from pathlib import Path

    _load_builtin()
    # Absolute paths: workers start in other directories than the command that exported them.
    pairs = [(a, str(Path(p).expanduser().resolve())) for spec in specs for a, p in parse_sources(spec)]
    reports = [_load_source(a, p) for a, p in pairs]
    known = os.environ.get(SOURCES_ENV, "")
    entries = [e for e in known.split(";") if e.strip()]
    for adapter, path in pairs:
        entry = f"{adapter}:{path}"
        if entry not in entries:
            entries.append(entry)
    if entries:
        os.environ[SOURCES_ENV] = ";".join(entries)
    return reports


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import os

        import bench.builtin  # noqa: F401  (registers tasks at import)

        for adapter, path in parse_sources(os.environ.get(SOURCES_ENV, "")):
            _load_source(adapter, path)
