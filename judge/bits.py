"""Exact comparisons of tensors by their bits, shared by the judge and the candidate process.

Why bits: a check that a tensor did not change must see every change, NaN payloads and the
sign of zero included, and must call NaN equal to itself (`torch.equal` on values does not).
"""

from __future__ import annotations

from typing import Any

import torch

_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """`t`'s elements as integers of the same width (a bool, complex or odd-width tensor as itself)."""
    size = t.element_size()
    if t.dtype == torch.bool or t.is_complex() or size not in _INTS:
        return t
    return t.contiguous().view(_INTS[size])


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat_tensors(v)]
    return []


def same_bits(a: Any, b: Any) -> bool:
    """Both values hold the same tensors bit for bit (compared on `a`'s device: copying to the
    host cost a third of a hidden case set's judging time on an H200)."""
    pa, pb = flat_tensors(a), flat_tensors(b)
    return len(pa) == len(pb) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(as_bits(x), as_bits(y.to(x.device)))
        for x, y in zip(pa, pb, strict=True))


def unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    """An input the call did not change: the same bits, or for floating point the same values
    with NaN where NaN was (a kernel that writes back what it read changed nothing)."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    after = after.to(before.device)
    if torch.equal(as_bits(before), as_bits(after)):
        return True
    if before.is_floating_point():
        return bool(torch.equal(torch.nan_to_num(before, nan=0.0), torch.nan_to_num(after, nan=0.0)))
    return False
