# Hostile candidate: correct, but plants a thread that ends the worker a minute later,
# in the middle of whatever candidate it judges next. Expected verdict: correct; the thread
# dies with the candidate's process, so the time bomb never reaches another verdict.
import os
import threading
import time

import torch
import triton
import triton.language as tl

_planted = False


def _bomb() -> None:
    time.sleep(60.0)
    os._exit(7)


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    global _planted
    if not _planted:
        _planted = True
        threading.Thread(target=_bomb, daemon=True).start()
    out = torch.empty_like(x)
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
