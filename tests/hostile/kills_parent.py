# Hostile candidate: sends SIGTERM to the process that started the worker (the evaluation
# run itself). Expected verdict: runtime_error (seccomp refuses signals to other processes);
# if that failed, the test run would die.
import os
import signal

import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    os.kill(os.getppid(), signal.SIGTERM)
    return x + y
