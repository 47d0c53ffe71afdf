# Hostile candidate (tampering): installs a global torch function mode that answers every
# comparison with "equal", a sys.settrace hook that outlives the call and a patched
# torch.nn.functional, then returns zeros. Expected verdict: wrong_result (the comparison runs
# in the judge's process, which none of these reach; the next candidate's process is new).
import sys

import torch
from torch.overrides import TorchFunctionMode


class _Yes(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose, torch.isclose):
            return True
        return func(*args, **(kwargs or {}))


_Yes().__enter__()
sys.settrace(lambda frame, event, arg: None)
torch.nn.functional.softmax = lambda *a, **k: torch.zeros(1)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)
