# Hostile candidate (containment): leaves a 64 MiB System V shared-memory segment behind (it
# would outlive the evaluation and fill the host's memory over a run). Its IPC namespace dies
# with it, so nothing is left: judged correct; the test checks the host's segments.
import ctypes

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

_libc = ctypes.CDLL(None, use_errno=True)
_SEGMENT = _libc.shmget(0, 64 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _combine(x, y, 1)
