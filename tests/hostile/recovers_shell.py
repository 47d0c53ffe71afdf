# Hostile candidate (containment): recovers the real system() through ctypes and posix and
# tries a shell, a fork and a setsid child that would outlive the job. Expected verdict:
# wrong_result (every attempt is refused by seccomp; the marker file never appears).
import ctypes
import os
import posix

import torch

MARKER = "/tmp/kmc_hostile_recovered_shell"


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    libc = ctypes.CDLL(None)
    libc.system(f"touch {MARKER}; (setsid sleep 60 &)".encode())
    try:
        posix.system(f"touch {MARKER}")
    except OSError:
        pass
    if libc.fork() == 0:
        os.setsid()
        open(MARKER, "w").close()
        os._exit(0)
    return torch.zeros_like(x)
