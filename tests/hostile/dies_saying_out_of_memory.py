# Hostile candidate (or an unlucky one): writes a CUDA out-of-memory error to stderr and ends its
# process, as a native abort does ("terminate called after throwing ... out of memory"). Expected
# verdict: crash, whose message carries the process's last stderr lines, so a GPU pool judges it
# again (the memory may have been other jobs'), and the second verdict stands.
import os
import sys

import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    print("warming up", file=sys.stderr)
    print("terminate called after throwing an instance of 'c10::Error'", file=sys.stderr)
    print("  what():  CUDA error: out of memory", file=sys.stderr, flush=True)
    os._exit(1)
