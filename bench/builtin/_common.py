"""Shared helpers for built-in task definitions: seeded inputs and size/byte arithmetic."""

from __future__ import annotations

import torch

from bench.task import Case

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int32": 4, "int64": 8}


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def generator(case: Case, salt: int = 0) -> torch.Generator:
    """Inputs are drawn on the CPU from a seeded generator, then moved: the same case gives
    the same values on every device, so CPU and GPU verdicts are comparable."""
    g = torch.Generator(device="cpu")
    g.manual_seed(case.seed * 1_000_003 + salt)
    return g


def randn(shape: tuple[int, ...], case: Case, device: str, salt: int = 0, scale: float = 1.0,
          dtype: str | None = None) -> torch.Tensor:
    t = torch.randn(shape, generator=generator(case, salt), dtype=torch.float32) * scale
    return t.to(device=device, dtype=torch_dtype(dtype or case.dtype))


def nbytes(case: Case, n_elements: int) -> int:
    return ELEMENT_BYTES[case.dtype] * n_elements
