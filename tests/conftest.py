"""Shared test setup: GPU tests are skipped cleanly on machines without one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _has_gpu() -> bool:
    if os.environ.get("KMC_FORCE_CPU") == "1":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


HAS_GPU = _has_gpu()
if not HAS_GPU:
    # Triton decides at import whether its own library functions (tl.max, tl.sum, ...) are
    # interpreted; a test that imports triton first without this would leave every later
    # in-process interpreted kernel unable to call them. Workers get it in their environment.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`gpu` tests are skipped without a GPU; `interpreter` tests (Triton kernels run in this
    process on CPU tensors) with one, where Triton was imported to compile for the GPU: they
    run on every CPU-only machine, CI's included."""
    marker, why = ("interpreter", "runs Triton in this process on CPU tensors: the CPU interpreter only") \
        if HAS_GPU else ("gpu", "needs a CUDA or ROCm GPU")
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if marker in item.keywords:
            item.add_marker(skip)
