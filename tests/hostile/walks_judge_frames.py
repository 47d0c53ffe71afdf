# Hostile candidate (tampering): walks up the call stack looking for the judge's expected output
# or its comparison function, to return or disable it. Expected verdict: wrong_result (the
# judge's frames are in another process; all this finds is the candidate server).
import sys

import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("expected", "reference", "expected_output"):
            value = frame.f_locals.get(name) or frame.f_globals.get(name)
            if isinstance(value, torch.Tensor) and value.shape == x.shape:
                return value.clone()
            if callable(value):
                return value(x, y)
        frame = frame.f_back
    return torch.zeros_like(x)
