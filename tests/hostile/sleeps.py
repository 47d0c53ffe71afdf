# Hostile candidate: correct kernel, but sleeps far past any job limit first.
# Expected verdict: timeout.
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    time.sleep(3600)
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(out.numel(), 1024),)](x, y, out, out.numel(), BLOCK_SIZE=1024)
    return out
