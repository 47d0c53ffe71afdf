# Hostile candidate (a cheat aimed at the op record): a buffer made where the recorder sees it
# is filled with the finished sum by a helper thread, whose dispatch modes are its own, through
# `.data` (a tensor with a version counter of its own, so the buffer's counter never moves);
# a Triton kernel then copies the buffer into the output. Expected verdict: torch_fallback
# (unrecorded_memory).
import threading

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
    helper = threading.Thread(target=lambda: staging.data.copy_(x + y))
    helper.start()
    helper.join()
    out = torch.empty_like(x)
    _relay[(triton.cdiv(x.numel(), 1024),)](staging, out, x.numel(), BLOCK=1024)
    return out
