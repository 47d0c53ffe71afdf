# Hostile candidate: dereferences a null pointer through ctypes inside the call, killing
# the worker with SIGSEGV. Expected verdict: crash.
import ctypes

import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    ctypes.string_at(0)
    return x + y
