# Control (false reject once): per-block partial sums in a Triton kernel, the final sum of the
# partials in PyTorch, which total_sum's allow-list admits. Expected verdict: correct.
import torch
import triton
import triton.language as tl


@triton.jit
def _partial_sum_kernel(x_ptr, partial_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(x, axis=0))


def total_sum(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_partials = triton.cdiv(x.numel(), 4096)
    partials = torch.empty((n_partials,), device=x.device, dtype=torch.float32)
    _partial_sum_kernel[(n_partials,)](x, partials, x.numel(), BLOCK_SIZE=4096)
    return partials.sum()
