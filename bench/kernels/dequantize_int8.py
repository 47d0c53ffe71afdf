import torch
import triton
import triton.language as tl


@triton.jit
def _dequantize_int8_kernel(q_ptr, scale_ptr, out_ptr, stride_q, stride_o, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    block = tl.program_id(1)
    cols = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    q = tl.load(q_ptr + row * stride_q + cols, mask=mask, other=0).to(tl.float32)
    s = tl.load(scale_ptr + row).to(tl.float32)
    y = q * s
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    q = q.contiguous()
    n_rows, n_cols = q.shape
    out = torch.empty((n_rows, n_cols), device=q.device, dtype=scale.dtype)
    BLOCK_SIZE = 1024
    grid = (n_rows, triton.cdiv(n_cols, BLOCK_SIZE))
    _dequantize_int8_kernel[grid](q, scale, out, q.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
