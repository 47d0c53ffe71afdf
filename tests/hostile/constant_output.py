# Hostile candidate: launches a kernel that writes zeros everywhere (zeros pass some
# public harnesses' bf16 softmax checks). Expected verdict: wrong_result.
import torch
import triton
import triton.language as tl


@triton.jit
def _zero_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK_SIZE,), dtype=tl.float32), mask=offsets < n_elements)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _zero_kernel[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), BLOCK_SIZE=1024)
    return out
