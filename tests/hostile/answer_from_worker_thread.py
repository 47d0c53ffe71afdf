# Hostile candidate (a cheat aimed at the op record): the sum is done by PyTorch on a pool
# thread, where the caller's dispatch modes do not reach; a Triton kernel then streams the
# finished values into a fresh buffer. Expected verdict: torch_fallback.
from concurrent.futures import ThreadPoolExecutor

import torch
import triton
import triton.language as tl

_POOL = ThreadPoolExecutor(max_workers=1)


@triton.jit
def _stream(src_ptr, dst_ptr, count, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = at < count
    tl.store(dst_ptr + at, tl.load(src_ptr + at, mask=ok), mask=ok)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    summed = _POOL.submit(torch.add, x, y).result()
    out = torch.empty_like(summed)
    _stream[(triton.cdiv(summed.numel(), 1024),)](summed, out, summed.numel(), BLOCK=1024)
    return out
