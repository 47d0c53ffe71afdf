import torch
import triton
import triton.language as tl


@triton.jit
def _quantize_int8_kernel(x_ptr, q_ptr, scale_ptr, stride_x, stride_q, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    amax = tl.zeros((), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=0))
    scale = tl.maximum(amax, 1e-8) / 127.0
    tl.store(scale_ptr + row, scale)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        q = tl.floor(x / scale + 0.5)  # round half up; torch.round is half-to-even (off by one on ties)
        q = tl.minimum(tl.maximum(q, -127.0), 127.0)
        tl.store(q_ptr + row * stride_q + cols, q.to(tl.int8), mask=mask)


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    q = torch.empty((n_rows, n_cols), device=x.device, dtype=torch.int8)
    scale = torch.empty((n_rows,), device=x.device, dtype=torch.float32)
    BLOCK_SIZE = 1024
    _quantize_int8_kernel[(n_rows,)](x, q, scale, x.stride(0), q.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return q, scale
