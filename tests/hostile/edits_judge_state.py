# Hostile candidate (tampering): loosens the tolerance table, rewrites the frozen task record
# with object.__setattr__ and empties the evaluator's caches, falling back on zeros when none
# of that is reachable. Expected verdict: wrong_result (none of it is in this process).
import gc

import torch

try:
    from bench.task import DEFAULT_TOLERANCES, Tolerance

    for key in list(DEFAULT_TOLERANCES):
        DEFAULT_TOLERANCES[key] = Tolerance(atol=1e9, rtol=1e9)
except ImportError:
    pass
for obj in gc.get_objects():
    if type(obj).__name__ == "Task":
        object.__setattr__(obj, "reference", lambda x, y: torch.zeros_like(x))
    if type(obj).__name__ == "_InputCache":
        obj.entries.clear()


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)
