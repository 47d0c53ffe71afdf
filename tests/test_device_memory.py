"""judge/device_memory.py: a judge worker hands idle cached GPU blocks back after a job, past a
bound, and never on the CPU. torch's CUDA calls are stood in for (no GPU here); the GPU test
checks the real allocator."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

from judge import device_memory


class FakeCuda:
    def __init__(self, reserved: int, allocated: int) -> None:
        self.reserved, self.allocated, self.emptied = reserved, allocated, 0

    def is_available(self) -> bool:
        return True

    def memory_reserved(self, device: Any = None) -> int:
        return self.reserved

    def memory_allocated(self, device: Any = None) -> int:
        return self.allocated

    def device(self, device: Any) -> Any:
        return contextlib.nullcontext()

    def empty_cache(self) -> None:
        self.emptied += 1
        self.reserved = self.allocated


@pytest.mark.parametrize(("idle_gib", "released"), [(0.5, False), (1.0, False), (3.5, True)])
def test_idle_blocks_past_the_bound_go_back(monkeypatch: pytest.MonkeyPatch, idle_gib: float, released: bool) -> None:
    fake = FakeCuda(reserved=int((4 + idle_gib) * 2**30), allocated=4 * 2**30)
    monkeypatch.setattr(device_memory.torch, "cuda", fake)
    got = device_memory.release_cached_blocks("cuda")
    assert (got == int(idle_gib * 2**30)) if released else got == 0
    assert fake.emptied == (1 if released else 0)
    assert fake.reserved == (fake.allocated if released else int((4 + idle_gib) * 2**30))


def test_nothing_happens_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCuda(reserved=8 * 2**30, allocated=0)
    monkeypatch.setattr(device_memory.torch, "cuda", fake)
    assert device_memory.release_cached_blocks("cpu") == 0 and fake.emptied == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_the_allocators_idle_blocks_are_handed_back() -> None:
    kept = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    freed = torch.empty(device_memory.RELEASE_ABOVE_BYTES + (256 << 20), dtype=torch.uint8, device="cuda")
    del freed
    idle = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    assert idle > device_memory.RELEASE_ABOVE_BYTES
    assert device_memory.release_cached_blocks("cuda") == idle
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() < idle
    assert kept.numel() == 64 << 20
