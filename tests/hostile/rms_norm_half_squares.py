# Hostile candidate (subtly wrong): squares in the input's dtype before widening, so float16
# values above ~256 overflow to inf. Expected verdict: wrong_result on the large-magnitude seed.
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    sq = (x * x).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride + cols, (x.to(tl.float32) * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    _rms_norm_kernel[(rows,)](x, weight, out, x.stride(0), cols, eps, BLOCK_SIZE=triton.next_power_of_2(cols))
    return out
