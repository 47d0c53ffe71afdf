# Hostile candidate: a correct vector_add that, before returning, overwrites every shared-memory
# arena the judge's link maps into its process (the judge's, carrying its inputs, and its own,
# carrying its replies) and tries to shrink them (which would make a reader fault). Expected
# verdict: correct; the arenas are per candidate process, the judge copies what it receives at
# once and writes every message whole, and the memory is sealed against shrinking, so nothing
# the judge looks at changes and the next candidate is judged as usual.
import ctypes
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def _scribble() -> None:
    with open("/proc/self/maps") as maps:
        lines = [line.split() for line in maps]
    for fields in lines:
        if len(fields) < 6 or "kmc-tensors" not in fields[5]:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if "w" in fields[1]:
            ctypes.memset(start, 0x7F, end - start)
        try:
            fd = os.open(f"/proc/self/map_files/{fields[0]}", os.O_RDWR)
        except OSError:
            continue
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    if x.is_cuda:
        torch.cuda.synchronize()
    _scribble()
    return out
