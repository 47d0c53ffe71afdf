# Hostile candidate (subtly wrong): on a tie across blocks the later block wins (>= instead of >),
# where torch.argmax returns the first index. Expected verdict: wrong_result on the ties seed.
import torch
import triton
import triton.language as tl


@triton.jit
def _argmax_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    best = tl.full((), -float("inf"), tl.float32)
    best_idx = tl.zeros((), dtype=tl.int32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        i = tl.argmax(x, axis=0)
        # strictly greater: on ties the earlier block keeps the index, as torch.argmax does
        better = m >= best  # the later block wins a tie
        best_idx = tl.where(better, start + i, best_idx)
        best = tl.where(better, m, best)
    tl.store(out_ptr + row, best_idx.to(tl.int64))


def argmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows,), device=x.device, dtype=torch.int64)
    BLOCK_SIZE = min(triton.next_power_of_2(n_cols), 1024)
    _argmax_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
