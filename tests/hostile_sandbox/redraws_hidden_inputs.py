# Hostile candidate (leak): a wrong kernel (x - y) that loads the task registry from its file
# under a name the import blocker does not refuse, to redraw the hidden inputs with the judge's
# seeds and copy out the float64 answers. In its sandbox the registry's file is not there:
# it falls back to its wrong answer, judged wrong_result (reaching the file: runtime_error).
import importlib.util
import os
import sys

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


def _load_registry() -> object:
    module = sys.modules.get("judge.sandbox")
    root = os.path.dirname(os.path.dirname(getattr(module, "__file__", "/nonexistent")))
    path = os.path.join(root, "bench", "registry.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("not_the_registry", path)
    return spec


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if _load_registry() is not None:
        raise RuntimeError("found the task registry's file")
    return _combine(x, y, -1)
