# Correct control (a false reject on the interpreter, issue 41): relu(x + y) in the inputs' own
# dtype, bfloat16 included, with no cast to float32 (one rounding either way, so it is exact on a
# GPU). The interpreter holds bfloat16 as raw bits and added them as integers (wrong_result);
# the judge's interpreter support computes on values. Expected: correct.
import torch
import triton
import triton.language as tl


@triton.jit
def _add_relu(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    total = tl.load(x_ptr + offsets, mask=inside) + tl.load(y_ptr + offsets, mask=inside)
    tl.store(out_ptr + offsets, tl.where(total > 0, total, 0), mask=inside)


def add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _add_relu[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
