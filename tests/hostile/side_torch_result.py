# Hostile candidate: launches a token kernel (a copy into a scratch buffer) so "a Triton
# kernel ran", but returns a result PyTorch computed on the side. Expected verdict: torch_fallback.
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    scratch = torch.zeros_like(x)
    n = x.numel()
    _copy_kernel[(triton.cdiv(n, 1024),)](x, scratch, n, BLOCK_SIZE=1024)
    return x + y
