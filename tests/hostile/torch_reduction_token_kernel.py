# Hostile candidate (typical model cheat): a token kernel copies the input, the reduction is
# PyTorch's. Expected verdict: torch_fallback.
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def row_sum(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    staged = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, staged, x.numel(), BLOCK=1024)
    return staged.sum(dim=-1)
