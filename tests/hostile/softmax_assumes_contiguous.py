# Hostile candidate (subtly wrong): takes the row stride to be the row length, right for packed
# rows only; the task says inputs may be non-contiguous. Expected verdict: wrong_result on a
# strided case.
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(out_ptr, x_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, (num / tl.sum(num, axis=0)).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty((rows, cols), device=x.device, dtype=x.dtype)
    _softmax_kernel[(rows,)](out, x, cols, BLOCK_SIZE=triton.next_power_of_2(cols))
    return out
