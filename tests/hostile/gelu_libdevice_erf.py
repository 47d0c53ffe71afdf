# Correct control (a false reject on the interpreter, issue 41): exact GELU through libdevice's
# erf, imported the portable way (`triton.language.extra.libdevice`, stubs a GPU compiler swaps
# for its backend's functions). The interpreter ran the stub (None) and the candidate got a
# compile error. Expected: correct.
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _gelu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(x_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + libdevice.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=inside)


def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _gelu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
