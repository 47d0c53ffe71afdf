# Hostile candidate: closes every descriptor it holds (its connection to the judge among them)
# and goes on running. Expected verdict: crash, the judge saying it killed the process.
import os
import time

import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    os.closerange(3, 4096)
    time.sleep(600)
    return x + y
