"""Adapters: turn an external suite, in a folder the user points to, into tasks.

`load_source("geak-eval", path)` reads the GEAK-eval layout (TritonBench-revised and the
ROCm benchmark); `load_source("kernelbench", path)` the KernelBench level-1 layout. Each
returns an `AdapterReport`: the tasks, plus every file it skipped with the reason (an
AMD-only construct on NVIDIA, a file not in the layout, ...), so the counts a claim was
made on can be re-derived. Files are only read and imported; no suite's command line runs.

The registry loads sources named in `KMC_TASK_SOURCES` (see bench/registry.py) in every
process, the evaluation workers included.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def detect_vendor() -> str:
    """'nvidia', 'amd' or 'cpu' (the Triton interpreter), decided as judge.device does but
    without importing runners: bench sits below runners in the data flow."""
    if os.environ.get("KMC_FORCE_CPU") == "1" or os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "amd" if getattr(torch.version, "hip", None) else "nvidia"
    return "cpu"


ADAPTERS = ("geak-eval", "kernelbench")


def load_source(adapter: str, path: str | Path, vendor: str | None = None) -> AdapterReport:
    root = Path(path).expanduser().resolve()
    if not root.exists():
        raise AdapterError(f"{adapter} source {str(path)!r} does not exist")
    vendor = vendor or detect_vendor()
    if adapter == "geak-eval":
        from bench.adapters.geak_eval import load

        return load(root, vendor)
    if adapter == "kernelbench":
        from bench.adapters.kernelbench import load

        return load(root, vendor)
    raise AdapterError(f"unknown adapter {adapter!r}; known: {', '.join(ADAPTERS)}")
