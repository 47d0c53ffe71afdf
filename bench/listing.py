"""`cli.py bench list` as a library call: the tasks of a suite (built-in and external), one
record each, with the external sources' load reports (counts and skip reasons)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.registry import all_tasks, load_sources, resolve_sources, suite_tasks
from bench.task import Task


def task_row(t: Task) -> dict[str, Any]:
    """One task as `bench list --json` prints it."""
    return {"id": t.id, "suites": list(t.suites), "category": t.category, "difficulty": t.difficulty,
            "dtypes": list(t.dtypes), "visible_cases": len(t.visible), "hidden_cases_gpu": len(t.hidden_gpu),
            "hidden_cases_cpu": len(t.hidden_cpu), "entry_point": t.entry_point, "signature": t.signature,
            "source": t.source}


@dataclass
class TaskListing:
    rows: list[dict[str, Any]]
    reports: list[Any] = field(default_factory=list)  # bench.adapters.AdapterReport per source


def list_tasks(suite: str | None = None, sources: list[str] | None = None, vendor: str | None = None) -> TaskListing:
    """Every task (or a suite's), after loading `sources` [$KMC_TASK_SOURCES] for `vendor`
    (None: this machine's). UnknownTaskError / TaskSourceError for a bad suite or source."""
    reports = load_sources(resolve_sources(sources), vendor)
    tasks = suite_tasks(suite) if suite else all_tasks()
    return TaskListing([task_row(t) for t in tasks], reports)
