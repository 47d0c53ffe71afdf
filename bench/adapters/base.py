"""The SuiteAdapter protocol and the report an adapter returns (the registry is bench/adapters/registry.py).

Writing a suite adapter (a plugin is one file; nothing else changes; tests/toy_adapter.py is a
whole one, docs/EXTENDING.md walks through it):

    from pathlib import Path

    from bench.adapters.base import AdapterError, AdapterReport, Skipped
    from bench.adapters.registry import register_adapter
    from bench.task import Task

    @register_adapter("my-suite")                   # the ADAPTER of `--source ADAPTER:PATH`
    class MySuite:
        def load(self, root: Path, vendor: str) -> AdapterReport:
            files = sorted(root.glob("*.py"))
            if not files:                           # not this suite's layout at all
                raise AdapterError(f"{root} holds no *.py files (the my-suite layout)")
            report = AdapterReport("my-suite", str(root), vendor)
            for path in files:
                ...                                 # report.tasks.append(Task(...)), or
                                                    # report.skipped.append(Skipped(str(path), why))
            return report

Rules the registry, the runs and the judge rely on:
- `load(root, vendor)` gets the user's path resolved and known to exist, and the run's target:
  "nvidia", "amd" or "cpu" (the Triton interpreter). A fresh instance is made for every load.
- Raise `AdapterError` (one line: the command prints it and exits 2) only when `root` is not
  the suite's layout at all. A file that cannot become a task is a `Skipped(path, reason)`,
  never an exception and never dropped silently, so the counts a claim rests on can be
  re-derived (`bench list --json --source ...` lists them). What the target cannot run (AMD-only code
  on NVIDIA) is skipped so, with the reason.
- The same folder and vendor give the same tasks in every process: the parent, each evaluation
  worker (from its `--task-source` arguments, at its start) and a resumed or replayed run all
  load the source themselves, so ids, cases, inputs and references must not depend on the
  process, the clock or the order of loading.
- Task ids carry a prefix of the suite's own (`tb-`, `rocm-`, `kb-l1-`): an id that a built-in
  task or another source already holds is refused when the source loads (bench/registry.py).
  `suites` names the `--suite` selections a task belongs to.
- Each task is a `bench.task.Task` (bench/task.py says which fields a method sees and which only
  the judge keeps). Suite code imported from text, and a baseline that is text rather than a
  file under bench/kernels (or eager PyTorch, `triton_baseline=False`), is `AdaptedTask` in
  bench/adapters/_adapted.py, as kernelbench.py uses it.
- Only read and import the suite's files: never run its scripts or command line, download
  nothing.
- The class must be found in every process a run starts, so importing its module in the caller
  (as tests do) registers it there only: built-ins are listed in registry.py `BUILTIN_MODULES`;
  an installed package names its class in the entry-point group `kernel_method_compare.adapters`:

      [project.entry-points."kernel_method_compare.adapters"]
      my-suite = "my_package.my_suite:MySuite"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.task import Task


class AdapterError(ValueError):
    """The source cannot be read at all (unknown adapter, missing folder, wrong layout)."""


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass
class AdapterReport:
    adapter: str
    root: str
    vendor: str
    tasks: list[Task] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, Any]:
        by_suite: dict[str, int] = {}
        for t in self.tasks:
            for s in t.suites:
                by_suite[s] = by_suite.get(s, 0) + 1
        return {"loaded": len(self.tasks), "skipped": len(self.skipped), "by_suite": by_suite}

    def to_json(self) -> dict[str, Any]:
        return {"adapter": self.adapter, "root": self.root, "vendor": self.vendor, **self.counts(),
                "tasks": [t.id for t in self.tasks],
                "skip_reasons": [{"path": s.path, "reason": s.reason} for s in self.skipped], "notes": list(self.notes)}


class SuiteAdapter(Protocol):
    name: str  # set by @register_adapter

    def load(self, root: Path, vendor: str) -> AdapterReport: ...
