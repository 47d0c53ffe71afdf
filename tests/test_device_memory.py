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
        self.peak_allocated, self.peak_reserved, self.resets = allocated, reserved, 0

    def is_available(self) -> bool:
        return True

    def memory_reserved(self, device: Any = None) -> int:
        return self.reserved

    def memory_allocated(self, device: Any = None) -> int:
        return self.allocated

    def max_memory_allocated(self, device: Any = None) -> int:
        return self.peak_allocated

    def max_memory_reserved(self, device: Any = None) -> int:
        return self.peak_reserved

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.resets += 1
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

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


def test_before_waiting_behind_a_job_alone_whatever_is_idle_goes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCuda(reserved=4 * 2**30 + (256 << 20), allocated=4 * 2**30)  # under the bound between jobs
    monkeypatch.setattr(device_memory.torch, "cuda", fake)
    assert device_memory.release_cached_blocks("cuda") == 0 and fake.emptied == 0
    assert device_memory.release_cached_blocks("cuda", above=0) == 256 << 20 and fake.emptied == 1


def test_nothing_happens_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCuda(reserved=8 * 2**30, allocated=0)
    monkeypatch.setattr(device_memory.torch, "cuda", fake)
    assert device_memory.release_cached_blocks("cpu") == 0 and fake.emptied == 0


def test_a_jobs_peaks_are_its_own_and_read_before_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCuda(reserved=12 * 2**30, allocated=2 * 2**30)  # peaks of an earlier job
    fake.peak_reserved = 18 * 2**30
    monkeypatch.setattr(device_memory.torch, "cuda", fake)
    device_memory.start_job("cuda")
    assert fake.resets == 1
    fake.peak_allocated, fake.peak_reserved = 5 * 2**30, 14 * 2**30  # this job's
    steps = device_memory.job_memory("cuda")
    assert steps == {"memory:peak_allocated_gib": 5.0, "memory:peak_reserved_gib": 14.0, "memory:released_gib": 10.0}
    assert fake.emptied == 1


def test_on_the_cpu_a_job_records_no_peak_and_resets_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCuda(reserved=8 * 2**30, allocated=0)
    monkeypatch.setattr(device_memory.torch, "cuda", fake)
    device_memory.start_job("cpu")
    assert device_memory.job_memory("cpu") == {"memory:released_gib": 0.0} and fake.resets == 0


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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_a_jobs_peak_counts_what_it_allocated_and_freed() -> None:
    device_memory.start_job("cuda")
    before = torch.cuda.memory_allocated()
    transient = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    del transient
    steps = device_memory.job_memory("cuda")
    assert steps["memory:peak_allocated_gib"] * 2**30 >= before + (512 << 20)
    assert steps["memory:peak_reserved_gib"] >= steps["memory:peak_allocated_gib"]
