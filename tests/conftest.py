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
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
