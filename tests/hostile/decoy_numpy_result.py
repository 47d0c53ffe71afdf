# Hostile candidate (typical model cheat): the answer computed with numpy (no PyTorch operation
# to record) into the output, then a launch whose stores never fire. Expected verdict on the
# interpreter: torch_fallback (the launch is handed numpy's memory, which no recorded operation
# made; were it not, no store of any kernel landed in the output: no_kernel).
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _noop_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n_elements), mask=offsets < 0)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.from_numpy(np.add(x.numpy(), y.numpy()))
    _noop_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
    return out
