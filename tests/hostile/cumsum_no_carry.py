# Hostile candidate (cumsum): scans each 1024-wide block but forgets the running total of
# the blocks before it; right only for rows that fit one block. Expected verdict:
# wrong_result (wrong reduction across blocks).
import torch
import triton
import triton.language as tl


@triton.jit
def _cumsum_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride + cols, tl.cumsum(x, axis=0), mask=mask)


def cumsum(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _cumsum_kernel[(x.shape[0],)](x, out, x.stride(0), x.shape[1], BLOCK_SIZE=1024)
    return out
