"""Adapters: turn an external suite, in a folder the user points to, into tasks.

`load_source("geak-eval", path)` reads the GEAK-eval layout (TritonBench-revised and the
ROCm benchmark); `load_source("kernelbench", path)` the KernelBench level-1 layout. Each
returns an `AdapterReport`: the tasks, plus every file it skipped with the reason (an
AMD-only construct on NVIDIA, a file not in the layout, ...), so the counts a claim was
made on can be re-derived. Files are only read and imported; no suite's command line runs.

An adapter is a class registered by name (base.py opens with the recipe; registry.py looks
names up, built-ins first, then installed plugins' entry points). The task registry loads the
sources a command or run names (see bench/registry.py) in every process, the evaluation
workers included.
"""

from __future__ import annotations

from bench.adapters.base import AdapterError, AdapterReport, Skipped, SuiteAdapter
from bench.adapters.registry import (
    ENTRY_POINT_GROUP,
    adapter_class,
    adapter_names,
    detect_vendor,
    load_source,
    register_adapter,
)

__all__ = ["ENTRY_POINT_GROUP", "AdapterError", "AdapterReport", "Skipped", "SuiteAdapter", "adapter_class",
           "adapter_names", "detect_vendor", "load_source", "register_adapter"]
