# Hostile candidate: starts a shell that writes a marker file. Expected verdict:
# runtime_error (seccomp refuses process creation); the test checks the file
# was never written.
import subprocess

import torch

MARKER = "/tmp/kmc_hostile_shell_marker"


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    subprocess.run(["sh", "-c", f"echo pwned > {MARKER}"], check=False)
    return x + y
