# Hostile candidate (containment): writes as much as it can into /tmp and its own folder and
# leaves it there. Expected verdict: wrong_result (the writes stop at the cap; nothing is left
# behind in the real /tmp afterwards).
import os

import torch

_CHUNK = b"\0" * (8 << 20)


def _fill(path: str) -> None:
    try:
        with open(path, "wb") as f:
            for _ in range(128):  # up to 1 GiB
                f.write(_CHUNK)
    except OSError:
        pass


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    _fill("/tmp/kmc_hostile_fill.bin")
    _fill(os.path.join(os.getcwd(), "fill.bin"))
    return torch.zeros_like(x)
