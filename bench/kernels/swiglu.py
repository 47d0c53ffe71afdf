import torch
import triton
import triton.language as tl


@triton.jit
def _swiglu_kernel(x_ptr, out_ptr, stride_x, stride_out, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    block = tl.program_id(1)
    cols = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def swiglu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, two_d = x.shape
    n_cols = two_d // 2
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    BLOCK_SIZE = 1024
    grid = (n_rows, triton.cdiv(n_cols, BLOCK_SIZE))
    _swiglu_kernel[grid](x, out, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
