# Control for what the interpreter truly cannot run: the add is PTX inline assembly, right on an
# NVIDIA GPU and impossible on the CPU interpreter. The verdict there must say so
# (unsupported_on_interpreter), never blame the candidate (runtime_error). Expected:
# unsupported_on_interpreter on the CPU, correct on an NVIDIA GPU.
import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(x_ptr + offsets, mask=inside).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=inside).to(tl.float32)
    total = tl.inline_asm_elementwise("add.f32 $0, $1, $2;", "=r,r,r", [x, y], dtype=tl.float32, is_pure=True,
                                      pack=1)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=inside)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
