# Hostile candidate: binds `torch.empty_like` at import (to dodge a judge that patches it
# later), launches a kernel that writes nothing, and returns the uninitialised buffer,
# hoping it holds the reference's freed result (on a GPU's caching allocator it often
# does). Expected verdict: wrong_result, with NaN from the poisoned allocation.
import torch
import triton
import triton.language as tl
from torch import empty_like as _alloc


@triton.jit
def _touch_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    never = offsets < 0
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=never), mask=never)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = _alloc(x)
    n = out.numel()
    _touch_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
    return out
