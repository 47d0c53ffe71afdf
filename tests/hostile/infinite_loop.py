# Hostile candidate: never returns. Expected verdict: timeout (the worker is killed and
# restarted; the next candidate is judged normally).
import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = 0
    while True:
        n += 1
