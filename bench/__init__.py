"""Tasks: the Task type, the built-in suites, and adapters for external suites."""

from bench.registry import UnknownTaskError, all_tasks, get_task, register_task, suite_names, suite_tasks
from bench.task import Case, Mutation, Task, TaskView, Tolerance

__all__ = [
    "Case", "Mutation", "Task", "TaskView", "Tolerance", "UnknownTaskError",
    "all_tasks", "get_task", "register_task", "suite_names", "suite_tasks",
]
