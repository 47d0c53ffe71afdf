# Hostile candidate: closes every descriptor it holds (its connection to the judge among them),
# then ends by itself a moment later with status 3, as a process whose exit takes a while does
# (a CUDA context's teardown). Expected verdict: crash, with that status, not the judge's kill.
import os
import time

import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    os.closerange(3, 4096)
    time.sleep(0.5)
    os._exit(3)
