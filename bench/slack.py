"""Copies of tensors followed by known bytes ("slack"): what every run of a suite's reference
gets, in the judge (judge/comparison.py `expected_output`, the adapter's probes of new shapes and
output arguments) and in a candidate's process (judge/candidate/wire.py receives inputs this way). A
reference that reads or writes a few rows past an input's end then reads the same known
bytes everywhere and writes harmlessly; unpadded, such a read can leave a GPU allocation and
fault, which ends the context of the process that ran it (seen on an H200: the adapter's probes
of TritonBench references ended the judge's context)."""

from __future__ import annotations

from typing import Any

import torch


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """A tensor's whole storage as bytes (strides and padding kept)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def slack_bytes(nbytes: int) -> int:
    """Zeroed bytes kept after a tensor's storage (`padded_copy`, `recv(slack=True)`): suites'
    references read and write a few rows past an input's end (an unmasked tail, a length table
    read one entry too far); with slack there, what they read is known (the same zeros in the
    judge's reference run and in the candidate's process) and what they write harms nothing."""
    return min(nbytes, 4 << 20) + 4096


def front_bytes(nbytes: int) -> int:
    """Zeroed bytes kept before a tensor's storage, as many as after it rounded up to 256 (every
    element size divides it, and alignment is kept). A kernel that indexes below its row start
    (a flip whose source index goes negative) read the heap there, whose bytes depend on the
    process's history: the same candidate got another failure text, and a method another
    prompt, from one run to the next (seen in the exact-replay test)."""
    return -(-slack_bytes(nbytes) // 256) * 256


def padded_copy(t: Any, nan_slack: bool = False) -> Any:
    """A copy of tensor `t` (same size and strides) with `front_bytes` zeroed bytes before it
    in its storage and `slack_bytes` zeroed bytes after, or with `nan_slack` NaN bytes (0xFF) after a floating-point
    tensor (an integer tensor's slack stays zero: an index read from it must not send a suite's
    kernel astray on a GPU, where a fault ends the judge's context); anything else is returned
    as it is."""
    if not isinstance(t, torch.Tensor):
        return t
    source = raw_bytes(t)
    n = source.numel()
    front = front_bytes(n)
    raw = torch.zeros(front + n + slack_bytes(n), dtype=torch.uint8, device=t.device)
    raw[front:front + n].copy_(source)
    raw[front + n:].fill_(0xFF if nan_slack and (t.is_floating_point() or t.is_complex()) else 0)
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(
        raw.untyped_storage(), t.storage_offset() + front // t.element_size(), t.size(), t.stride())
