# Hostile candidate (a cheat aimed at the op record): numpy adds the inputs straight into the
# memory of a buffer the recorder saw allocated (`tensor.numpy()` shares it, and numpy bumps no
# version counter); a Triton kernel then copies that buffer into the output. On the CPU the
# launch is handed known memory whose bytes changed out of the records' sight; on a GPU
# `.numpy()` refuses a CUDA tensor. Expected verdict: torch_fallback (unrecorded_memory) on the
# CPU, runtime_error on a GPU.
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _relay(src_ptr, dst_ptr, count, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < count
    tl.store(dst_ptr + at, tl.load(src_ptr + at, mask=inside), mask=inside)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    staging = torch.empty_like(x)  # recorded: known memory
    np.add(x.numpy(), y.numpy(), out=staging.numpy())  # numpy: no op recorded, no version bump
    out = torch.empty_like(x)
    _relay[(triton.cdiv(x.numel(), 1024),)](staging, out, x.numel(), BLOCK=1024)
    return out
