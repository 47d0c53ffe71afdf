import torch
import triton
import triton.language as tl


@triton.jit
def _gather_kernel(x_ptr, idx_ptr, out_ptr, stride_x, stride_i, stride_o, k, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    block = tl.program_id(1)
    offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < k
    idx = tl.load(idx_ptr + row * stride_i + offs, mask=mask, other=0)
    vals = tl.load(x_ptr + row * stride_x + idx, mask=mask)
    tl.store(out_ptr + row * stride_o + offs, vals, mask=mask)


def gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    index = index.contiguous()
    n_rows, k = index.shape
    out = torch.empty((n_rows, k), device=x.device, dtype=x.dtype)
    BLOCK_SIZE = 1024
    grid = (n_rows, triton.cdiv(k, BLOCK_SIZE))
    _gather_kernel[grid](x, index, out, x.stride(0), index.stride(0), out.stride(0), k,
                         BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
