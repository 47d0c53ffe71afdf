# Hostile candidate (typical model cheat): launches a kernel on a scratch buffer and returns
# x.t(), a view of the input (right values, no copy, no work). Expected verdict: wrong_result
# (the output shares memory with the input).
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


def transpose(x: torch.Tensor) -> torch.Tensor:
    scratch = torch.empty(16, device=x.device, dtype=torch.float32)
    _touch[(1,)](scratch, 16, BLOCK=16)
    return x.t()
