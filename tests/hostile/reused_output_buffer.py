# Hostile candidate (typical model cheat): one output buffer per shape, reused by every call,
# so each result is right when returned and wrong once the next call overwrites it.
# Expected verdict: wrong_result (outputs are compared after every call has returned).
import torch
import triton
import triton.language as tl

_BUFFERS: dict = {}


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    key = (x.shape, x.dtype)
    if key not in _BUFFERS:
        _BUFFERS[key] = torch.empty_like(x)
    out = _BUFFERS[key]
    _add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
