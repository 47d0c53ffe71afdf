# Hostile candidate (typical model cheat): fetches the task's reference from the project's
# registry and returns it. Expected verdict: runtime_error (the registry is not importable from
# the candidate's process).
import torch

from bench.registry import get_task

_reference = get_task("softmax").reference


def softmax(x: torch.Tensor) -> torch.Tensor:
    return _reference(x)
