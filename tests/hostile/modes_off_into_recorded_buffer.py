# Hostile candidate (a cheat aimed at the op record): the buffer is allocated where the recorder
# sees it (so its memory is "known"), then PyTorch writes the finished sum into it with the
# dispatch modes switched off, and a Triton kernel only copies that buffer into the output.
# The launch sees nothing but known memory; the bytes changed out of the records' sight.
# Expected verdict: torch_fallback (unrecorded_memory).
import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import _disable_current_modes


@triton.jit
def _relay(src_ptr, dst_ptr, count, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < count
    tl.store(dst_ptr + at, tl.load(src_ptr + at, mask=inside), mask=inside)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    staging = torch.empty_like(x)  # recorded: known memory
    with _disable_current_modes():
        torch.add(x, y, out=staging)  # not recorded: the answer lands in known memory
    out = torch.empty_like(x)
    _relay[(triton.cdiv(x.numel(), 1024),)](staging, out, x.numel(), BLOCK=1024)
    return out
