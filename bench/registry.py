"""Task and suite registry: built-in modules register at import; adapters register on load.

Unknown ids raise `UnknownTaskError` with the nearest known names, so a typo on the
command line becomes a one-line error rather than a KeyError traceback.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

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


_PROFILES: dict[str, Task] = {}
PROFILE_SEPARATOR = "@"


def get_task(task_id: str) -> Task:
    """A task by id; `<id>@<profile>` is a judging profile of task `<id>` (Task.profile)."""
    _load_builtin()
    if task_id in _TASKS:
        return _TASKS[task_id]
    base, sep, name = task_id.partition(PROFILE_SEPARATOR)
    if sep and base in _TASKS:
        if task_id not in _PROFILES:
            profile = _TASKS[base].profile(name)
            if profile is None:
                raise UnknownTaskError(f"task {base!r} has no judging profile {name!r}")
            _PROFILES[task_id] = profile
        return _PROFILES[task_id]
    raise UnknownTaskError(f"unknown task {task_id!r}{_near(task_id, sorted(_TASKS))}") from None


def profile_id(task_id: str, profile: str) -> str:
    return f"{task_id}{PROFILE_SEPARATOR}{profile}"


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
"""Default task sources, `ADAPTER:PATH` entries separated by `;` (e.g.
`geak-eval:/data/GEAK-eval;kernelbench:/data/KernelBench/KernelBench/level1`). Only a default:
a command's `--source` options or a config file's `task_sources:` replace it, the run records
the sources it used in config.json, and the evaluation workers are handed them explicitly
(runners/pool.py), so nothing reads this variable but `default_task_sources`."""

_SOURCE_REPORTS: dict[tuple[str, str, str | None], object] = {}


class TaskSourceError(UnknownTaskError):
    """A task source that cannot be loaded: unknown adapter, missing folder, not ADAPTER:PATH."""


def parse_sources(value: str) -> list[tuple[str, str]]:
    """`ADAPTER:PATH[;ADAPTER:PATH...]` into (adapter, path) pairs."""
    out = []
    for entry in value.split(";"):
        entry = entry.strip()
        if not entry:
            continue
        adapter, sep, path = entry.partition(":")
        if not sep or not path.strip() or not adapter.strip():
            raise TaskSourceError(f"task source {entry!r} is not ADAPTER:PATH")
        out.append((adapter.strip(), path.strip()))
    return out


def default_task_sources() -> list[str]:
    """The sources named in $KMC_TASK_SOURCES: the default a run then records."""
    return [f"{a}:{p}" for a, p in parse_sources(os.environ.get(SOURCES_ENV, ""))]


def normalize_sources(specs: list[str] | tuple[str, ...]) -> list[str]:
    """`ADAPTER:PATH` entries with absolute paths (workers and resumed runs start elsewhere),
    duplicates dropped, order kept. TaskSourceError for an entry that is not ADAPTER:PATH."""
    if isinstance(specs, str) or not all(isinstance(s, str) for s in specs):
        raise TaskSourceError(f"task sources must be a list of ADAPTER:PATH strings, got {specs!r}")
    out: list[str] = []
    for spec in specs:
        for adapter, path in parse_sources(spec):
            entry = f"{adapter}:{Path(path).expanduser().resolve()}"
            if entry not in out:
                out.append(entry)
    return out


def resolve_sources(specs: list[str] | tuple[str, ...] | None) -> list[str]:
    """The sources a command was given, or $KMC_TASK_SOURCES when it was given none
    (None or empty), normalised: what every command that takes tasks loads and records."""
    return normalize_sources(list(specs) if specs else default_task_sources())


def _load_source(adapter: str, path: str, vendor: str | None) -> object:
    key = (adapter, path, vendor)
    if key not in _SOURCE_REPORTS:
        from bench.adapters import AdapterError, load_source

        try:
            report = load_source(adapter, path, vendor)
        except AdapterError as exc:
            raise TaskSourceError(str(exc)) from None
        clash = next((t for t in report.tasks if t.id in _TASKS and _TASKS[t.id] is not t), None)
        if clash is not None:
            known = _TASKS[clash.id]
            if any(loaded[:2] == (adapter, path) for loaded in _SOURCE_REPORTS):
                raise TaskSourceError(f"task id {clash.id!r} is already loaded from {adapter}:{path} for another "
                                      f"target than {vendor or 'this machine'}; load a source for one target per process")
            raise TaskSourceError(f"task id {clash.id!r} comes from two sources: {_where(known)} and {_where(clash)} "
                                  f"(loading {adapter}:{path}); load only one of them")
        for task in report.tasks:
            register_task(task)
        _SOURCE_REPORTS[key] = report
    return _SOURCE_REPORTS[key]


def _where(task: Task) -> str:
    origin = getattr(task, "origin", "")
    return f"{task.source} ({origin})" if origin else task.source


def load_sources(specs: list[str] | tuple[str, ...], vendor: str | None = None) -> list[object]:
    """Register the tasks of `ADAPTER:PATH` sources in this process, for `vendor` (the run's
    target: "nvidia", "amd" or "cpu"; None detects it). Loading a source twice is free.
    Returns the adapters' reports (task counts and skip reasons)."""
    _load_builtin()
    return [_load_source(a, p, vendor) for spec in normalize_sources(specs) for a, p in parse_sources(spec)]


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import bench.builtin  # noqa: F401  (registers tasks at import)
