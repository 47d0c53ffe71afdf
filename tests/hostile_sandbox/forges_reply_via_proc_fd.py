# Hostile candidate (judge tampering): writes a forged reply on the worker's pipe through
# /proc/<pid>/fd/<n> of another process, so a wrong kernel (x - y) would be reported correct.
# Its sandbox shows no other process whose descriptors it could open: the wrong answer is
# judged (wrong_result); reaching a foreign descriptor is a runtime_error.
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _combine_kernel(x_ptr, y_ptr, out_ptr, n_elements, SIGN: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + SIGN * y, mask=mask)


def _combine(x: torch.Tensor, y: torch.Tensor, sign: int) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    _combine_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, SIGN=sign, BLOCK_SIZE=1024)
    return out


def _foreign_descriptor() -> str:
    me = str(os.getpid())
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and p != me]:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with open(f"/proc/{pid}/fd/{fd}", "wb"):
                    return f"{pid}/{fd}"
        except OSError:
            continue
    # Its own descriptors are not scanned here: on a GPU the driver opens pipes, eventfds and
    # device nodes of its own before the candidate is imported. That nothing of the judge's
    # survives into the sandbox is checked before any context exists (tests/test_sandbox.py).
    return ""


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    found = _foreign_descriptor()
    if found:
        raise RuntimeError(f"held a foreign descriptor {found}")
    return _combine(x, y, -1)
