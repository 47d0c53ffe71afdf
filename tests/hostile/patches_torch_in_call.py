# Hostile candidate: during the call, swaps torch functions the judge relies on
# (`torch.isfinite`, `torch.Tensor.__sub__`) so the comparison sees no error, and returns
# a wrong answer. Expected verdict: wrong_result (the comparison runs in the judge's process).
import torch

_done = False


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    global _done
    if not _done:
        _done = True
        real_sub = torch.Tensor.__sub__
        torch.isfinite = lambda t: torch.ones_like(t, dtype=torch.bool)
        torch.Tensor.__sub__ = lambda a, b: real_sub(a, a)
    return x * 2
