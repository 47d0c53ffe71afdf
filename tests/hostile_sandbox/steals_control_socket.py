# Hostile candidate (containment): copies the worker's or the template's control socket with
# pidfd_getfd, to ask the template for a process it would contain by a plan the candidate
# wrote itself. It can name no other process and pidfd_getfd is refused: judged correct.
import ctypes
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _combine_kernel(x_ptr, y_ptr, out_ptr, n_elements, SIGN: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + SIGN * y, mask=mask)


def _combine(x: torch.Tensor, y: torch.Tensor, sign: int) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    _combine_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, SIGN=sign, BLOCK_SIZE=1024)
    return out

_libc = ctypes.CDLL(None, use_errno=True)


def _steal() -> str:
    me = os.getpid()
    for pid in [1, *range(2, 4096)]:
        if pid == me:
            continue
        fd = _libc.syscall(434, pid, 0)  # pidfd_open
        if fd < 0:
            continue
        try:
            for target in range(0, 64):
                got = _libc.syscall(438, fd, target, 0)  # pidfd_getfd
                if got >= 0:
                    return f"fd {target} of pid {pid}"
        finally:
            os.close(fd)
    me_fd = _libc.syscall(434, me, 0)
    if me_fd >= 0 and _libc.syscall(438, me_fd, 3, 0) >= 0:
        return "its own channel through pidfd_getfd"
    return ""


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    stolen = _steal()
    if stolen:
        raise RuntimeError(f"stole {stolen}")
    return _combine(x, y, 1)
