"""A toy suite adapter, written from bench/adapters/base.py's docstring alone.

The toy suite is a folder of Python files, each a PyTorch function over 1-D float32 tensors of
one length, named after its file (tests/fixtures/toy_suite/vector_add.py). Each becomes the
task `toy-<name>` of suite `toy`: write that function in Triton. Its expert kernel (what `bench
check` checks, what speedups are measured against, what the simulated model answers) is the
built-in one of the same name under bench/kernels; a file without one is skipped with the
reason, as is a file that does not define its function.

It lives in tests/ on purpose: tests/test_toy_adapter.py installs it as a plugin through an
entry point and judges its task with `cli.py eval --source toy:...`, which shows that an
adapter needs no change outside its own file.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from typing import Any

import torch

from bench.adapters.base import AdapterError, AdapterReport, Skipped
from bench.adapters.registry import register_adapter
from bench.modules import import_file
from bench.task import KERNELS_DIR, Case, Task, case

HIDDEN_LENGTHS = (1, 97, 1025, 4099)


@register_adapter("toy")
class ToyAdapter:
    def load(self, root: Path, vendor: str) -> AdapterReport:
        files = sorted(root.glob("*.py")) if root.is_dir() else []
        if not files:
            raise AdapterError(f"{root} holds no *.py files (the toy layout)")
        report = AdapterReport("toy", str(root), vendor)
        for path in files:
            name = path.stem
            if not (KERNELS_DIR / f"{name}.py").is_file():
                report.skipped.append(Skipped(str(path), f"no expert kernel bench/kernels/{name}.py"))
                continue
            digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]  # the same in every process
            function = getattr(import_file(path, f"toy_suite_{name}_{digest}"), name, None)
            if not callable(function):
                report.skipped.append(Skipped(str(path), f"defines no function {name}"))
                continue
            report.tasks.append(_task(name, function, path.read_text()))
        return report


def _task(name: str, function: Any, text: str) -> Task:
    params = list(inspect.signature(function).parameters)

    def make_inputs(c: Case, device: str) -> tuple:
        g = torch.Generator().manual_seed(c.seed)
        return tuple(torch.randn(c.size("n"), generator=g).to(device=device, dtype=getattr(torch, c.dtype))
                     for _ in params)

    hidden = tuple(case(f"hidden-n{n}-s{s}", "float32", s, n=n) for n in HIDDEN_LENGTHS for s in (0, 1))
    return Task(
        id=f"toy-{name}",
        instruction=(f"Write a Triton kernel and a Python wrapper `{name}({', '.join(params)})` that computes, for "
                     f"1-D float32 tensors of one length, what this PyTorch function computes:\n```python\n{text}```"),
        entry_point=name,
        signature=f"def {name}({', '.join(f'{p}: torch.Tensor' for p in params)}) -> torch.Tensor",
        reference=function,
        make_inputs=make_inputs,
        dtypes=("float32",),
        visible=(case("visible-n1024", "float32", 0, n=1024),),
        hidden_gpu=hidden + (case("hidden-n1M", "float32", 2, n=1 << 20),),
        hidden_cpu=hidden,
        perf=(case("perf-n1M", "float32", 0, n=1 << 20),),
        baseline_file=f"{name}.py",
        difficulty=1,
        bytes_moved=lambda c: 4 * (len(params) + 1) * c.size("n"),
        flops=lambda c: c.size("n"),
        suites=("toy",),
        category="toy",
        source="toy",
    )
