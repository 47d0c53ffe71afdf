"""The poison an output buffer holds before a kernel writes it: NaN for floating point, True for
bool, a sentinel for integers. One definition, because the judge compares what the candidate's
process saw (judge/candidate/allocations.py, candidate side) with what the adapter's probe of a
suite's reference saw (bench/adapters/_outputs.py): both must fill the same values."""

from __future__ import annotations

from typing import Any

INT_SENTINEL = -0x5A5A


def poison_tensor(t: Any) -> Any:
    """`t` (a tensor) filled in place with the poison of its dtype, and returned."""
    import torch

    if t.numel() == 0:
        return t
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        info = torch.iinfo(t.dtype)
        t.fill_(max(info.min, min(info.max, INT_SENTINEL)) if info.min < 0 else info.max // 3)
    return t
