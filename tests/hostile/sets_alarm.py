# Hostile candidate: correct, but arms SIGALRM (default action: terminate) to go off a minute
# later, during some later candidate's job. Expected verdict: correct; the timer dies with the
# candidate's process at the end of its job, so no later verdict is affected.
import signal

import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    signal.alarm(60)
    out = torch.empty_like(x)
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
