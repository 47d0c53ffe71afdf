# Hostile candidate (subtly wrong): one block of at most 4096 columns per row, so everything past
# column 4096 is dropped. Hidden cases once stopped at 3001 columns on the CPU. Expected
# verdict: wrong_result on a row longer than 8192.
import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(x, axis=0).to(out_ptr.dtype.element_ty))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty((rows,), device=x.device, dtype=x.dtype)
    _row_sum_kernel[(rows,)](x, out, x.stride(0), cols, BLOCK_SIZE=min(triton.next_power_of_2(cols), 4096))
    return out
