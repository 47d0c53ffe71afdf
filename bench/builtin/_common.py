"""Shared helpers for built-in task definitions: seeded inputs and size/byte arithmetic."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from bench.task import Case

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int32": 4, "int64": 8}

SEEDS = range(5)
BF16_DOT_SKIP = ("the Triton interpreter does not support bfloat16 tl.dot (triton-lang/triton#11584); "
                 "judged on a GPU only")


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


def randint(low: int, high: int, shape: tuple[int, ...], case: Case, device: str, salt: int = 0,
            dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Integers in [low, high), e.g. indices; int64 unless asked otherwise."""
    t = torch.randint(low, high, shape, generator=generator(case, salt), dtype=torch.int64)
    return t.to(device=device, dtype=dtype)


def wide_dtype(x: torch.Tensor) -> torch.dtype:
    """The accumulation dtype a reference should use: float64 stays float64 (so the oracle's
    float64 run is really float64), anything narrower is widened to float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def nbytes(case: Case, n_elements: int) -> int:
    return ELEMENT_BYTES[case.dtype] * n_elements


def sizes(keys: str, shapes: Iterable[tuple[int, ...]]) -> list[dict[str, int]]:
    """`sizes("rows,cols", [(3, 7)])` -> `[{"rows": 3, "cols": 7}]`: shape lists stay readable."""
    names = [k.strip() for k in keys.split(",")]
    out = []
    for shape in shapes:
        if len(shape) != len(names):
            raise ValueError(f"shape {shape} does not match keys {names}")
        out.append(dict(zip(names, shape, strict=True)))
    return out
