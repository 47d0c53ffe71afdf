# Hostile candidate: not valid Python (unclosed bracket). Expected verdict: syntax_error.
import torch
import triton
import triton.language as tl


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x
    return out
