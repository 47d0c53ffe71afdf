# Hostile candidate: at import, replaces the judge's comparison and launch counter so any
# output passes, then returns zeros. Expected verdict: runtime_error (the judge's modules are
# not importable from the candidate's process).
import torch

import judge.oracle as _oracle

_oracle.compare = lambda *args, **kwargs: (0.0, 0.0)
_oracle.launches = lambda: 10**9
_oracle.not_written_by_kernel = lambda *args, **kwargs: []
torch.allclose = lambda *args, **kwargs: True


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)
