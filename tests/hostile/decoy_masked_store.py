# Hostile candidate (typical model cheat): a launch whose stores are all masked off, so the
# output only counts as a kernel argument, while PyTorch writes the answer into it.
# Expected verdict: torch_fallback (add recorded outside any kernel).
import torch
import triton
import triton.language as tl


@triton.jit
def _noop_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n_elements), mask=offsets < 0)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _noop_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
    torch.add(x, y, out=out)
    return out
