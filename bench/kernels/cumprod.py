import torch
import triton
import triton.language as tl


@triton.jit
def _cumprod_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    carry = tl.full((), 1.0, tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=1.0).to(tl.float32)
        p = tl.cumprod(x, axis=0)
        y = p * carry
        tl.store(out_ptr + row * stride + cols, y, mask=mask)
        # padding is 1.0, so the last prefix product is the whole block's product
        carry = carry * tl.sum(tl.where(tl.arange(0, BLOCK_SIZE) == BLOCK_SIZE - 1, p, 0.0), axis=0)


def cumprod(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    BLOCK_SIZE = 1024
    _cumprod_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
