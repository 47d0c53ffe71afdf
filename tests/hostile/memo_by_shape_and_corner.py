# Hostile candidate (typical model cheat): memoises results by shape, dtype and a rounded
# first value, so a later case of the same shape is answered from an earlier one.
# Expected verdict: wrong_result.
import torch
import triton
import triton.language as tl

_MEMO: dict = {}


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    key = (tuple(x.shape), x.dtype, round(float(x.flatten()[0]) / 4.0))
    if key in _MEMO:
        return _MEMO[key].clone()
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    _MEMO[key] = out.clone()
    return out
