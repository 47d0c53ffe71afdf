# Hostile candidate: the wrapper raises before launching anything. Expected verdict: runtime_error.
import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    raise ValueError("shapes are not supported")
