"""Tasks: the Task type, the built-in suites, and adapters for external suites.

The names below are loaded on first use, so importing a small helper such as `bench.modules`
(as the candidate process does) does not import the task registry with it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "UnknownTaskError": "bench.registry", "all_tasks": "bench.registry", "get_task": "bench.registry",
    "register_task": "bench.registry", "suite_names": "bench.registry", "suite_tasks": "bench.registry",
    "Case": "bench.task", "Mutation": "bench.task", "Task": "bench.task", "TaskView": "bench.task",
    "Tolerance": "bench.task",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bench' has no attribute {name!r}")
