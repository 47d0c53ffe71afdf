"""How many judging workers a machine can run, and why: the pool's default worker count.

Judging (import, compile, correctness) is CPU work in the candidate's process and the judge's,
plus GPU memory: each judge worker keeps a CUDA context, a cache of case inputs and reference
outputs, a candidate process with its own context and a spare forked ahead. Timing needs no
extra workers: it is a lane per GPU at the fair gate (judge/gate.py), served in turn by
whichever worker holds a candidate to time. So the count is the smallest of

- the usable cores (the process's CPU affinity), shared evenly between the GPUs;
- per GPU, its free memory over `GPU_MIB_PER_WORKER` (measured through NVML when pynvml is
  installed, which needs no CUDA context in this process; else `torch.cuda.mem_get_info`;
  unknown memory leaves the cores to decide, and the record says so);
- the host's available memory over `HOST_MIB_PER_WORKER`;

at least one worker per GPU and at most `MAX_WORKERS_PER_GPU`. On the CPU interpreter: cores and host memory. The plan and its
reasons are recorded in config.json (`executor`), so a slow or fast run can be explained.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from judge.device import Target

GPU_MIB_PER_WORKER = 8192
"""Device memory one judging worker may need: two CUDA contexts (judge, candidate) and a spare
one (~0.5 GiB each), its input cache (`INPUT_CACHE_MIB` at most) and a perf case's tensors."""
HOST_MIB_PER_WORKER = 1536
"""Host memory of one worker: the judge, its template and its candidate processes (torch and
triton imported in each)."""
MAX_WORKERS_PER_GPU = 4
"""The most judging workers the default puts on one GPU: on an H200, 4 judged faster than 2, and
6 finished fewer units of the full suite than 4 in the same time: its memory filled and
out-of-memory retries cost more than the extra workers gained (in a task-by-task run every worker
holds the same big task's case set at once; benchmarks/results/README.md, "Workers per GPU").
Measured again on an H100 (2026-12-05, the 7-task command, one sitting): 8 workers took 111 s
against 88 s with 4, with the CPU 43% busy and the GPU's SM 18%, and every job's GPU steps slower
(a hidden job's judging holds 1.9 s against 0.8 s, a context 1.65 s against 0.58 s): the
processes' contexts take turns on the GPU. `--workers N` overrides it."""
INPUT_CACHE_MIB = 4096
"""The most device memory a GPU worker keeps for cached case inputs and reference outputs."""


@dataclass(frozen=True)
class WorkerPlan:
    """The pool's layout: judging workers per device, one timing lane per GPU, and why."""

    workers: int
    per_device: dict[str, int]
    timing_lanes: int
    chosen: str  # "default" (from the machine) or "given" (--workers / an API argument)
    why: str
    cores: int
    free_gpu_mib: dict[str, int | None] = field(default_factory=dict)
    host_available_mib: int | None = None
    input_cache_mib: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def host_available_mib() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def nvml_free_mib(devices: Sequence[str]) -> dict[str, int] | None:
    """Free memory per device id through NVML (no GPU context made here), None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            found = {}
            for d in devices:
                handle = (pynvml.nvmlDeviceGetHandleByIndex(int(d)) if d.isdigit()
                          else pynvml.nvmlDeviceGetHandleByUUID(d))
                found[d] = int(pynvml.nvmlDeviceGetMemoryInfo(handle).free) >> 20
            return found
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML here
        return None


def device_free_mib(device: str | None, vendor: str) -> int | None:
    """The GPU's free memory through NVML, None where unknown (a CPU pool, no NVML, AMD): then
    only the end of the jobs beside a retirement recalls a worker. Never through torch, which
    would make a GPU context in this process."""
    if device is None or vendor != "nvidia":
        return None
    return (nvml_free_mib([device]) or {}).get(device)


def free_gpu_mib(devices: Sequence[str], vendor: str) -> dict[str, int | None]:
    """Free memory per device id (as the parent's *_VISIBLE_DEVICES names them), None where unknown."""
    found: dict[str, int | None] = {d: None for d in devices}
    if vendor == "nvidia" and (by_nvml := nvml_free_mib(devices)) is not None:
        return {**found, **by_nvml}
    try:
        import torch

        if torch.cuda.is_available():
            # Indices within this process's visible devices, in the order the parent lists them.
            for i, d in enumerate(devices[: torch.cuda.device_count()]):
                found[d] = int(torch.cuda.mem_get_info(i)[0]) >> 20
    except Exception:  # noqa: BLE001 - unknown memory: the cores decide, and the plan says so
        pass
    return found


def plan_workers(target: Target, devices: Sequence[str], requested: int | None = None, *,
                 cores: int | None = None, free_mib: dict[str, int | None] | None = None,
                 host_mib: int | None = -1) -> WorkerPlan:
    """The worker layout for `target` on `devices` (empty on the interpreter). `requested`: a
    count the user gave, kept (spread over the GPUs) but told against what memory allows.
    `cores`, `free_mib`, `host_mib`: measurements, read from the machine when not given."""
    cores = cores if cores is not None else usable_cores()
    host = host_available_mib() if host_mib == -1 else host_mib
    by_host = max(1, host // HOST_MIB_PER_WORKER) if host is not None else None
    if target.interpreter or not devices:
        by_cores = cores
        default = min(by_cores, by_host) if by_host is not None else by_cores
        count = requested if requested is not None else default
        base = f"{cores} usable core(s)" + (f", host memory allows {by_host}" if by_host is not None else "")
        why = (f"given; the machine would choose {default} ({base})" if requested is not None else
               f"{base}: {default} interpreter worker(s)")
        return WorkerPlan(count, {"cpu": count}, 0, "given" if requested is not None else "default", why, cores,
                          {}, host)
    free = free_mib if free_mib is not None else free_gpu_mib(devices, target.vendor)
    per_gpu_cores = max(1, cores // len(devices))
    per_device: dict[str, int] = {}
    reasons = []
    for d in devices:
        by_memory = max(1, (free.get(d) or 0) // GPU_MIB_PER_WORKER) if free.get(d) is not None else None
        n = per_gpu_cores if by_memory is None else min(per_gpu_cores, by_memory)
        per_device[d] = min(n, MAX_WORKERS_PER_GPU)
        reasons.append(f"GPU {d}: {per_gpu_cores} by cores, "
                       + (f"{by_memory} by free memory ({free[d]} MiB / {GPU_MIB_PER_WORKER} MiB each)"
                          if by_memory is not None else "free memory unknown")
                       + f", at most {MAX_WORKERS_PER_GPU} per GPU")
    default = sum(per_device.values())
    if by_host is not None and default > by_host:
        scale = by_host / default
        per_device = {d: max(1, int(n * scale)) for d, n in per_device.items()}
        reasons.append(f"host memory allows {by_host} in all")
        default = sum(per_device.values())
    chosen = "default"
    if requested is not None:
        chosen = "given"
        reasons.insert(0, f"given; the machine would choose {default}")
        spread = {d: requested // len(devices) + (1 if i < requested % len(devices) else 0)
                  for i, d in enumerate(devices)}
        per_device = {d: n for d, n in spread.items() if n > 0}
    known = [m for d in devices if (m := free.get(d)) is not None]
    most = max(per_device.values()) if per_device else 1
    cache = min(INPUT_CACHE_MIB, max(256, min(known) // max(most, 1) // 2)) if known else INPUT_CACHE_MIB
    return WorkerPlan(sum(per_device.values()), per_device, len(per_device), chosen,
                      f"{cores} usable core(s) over {len(devices)} GPU(s); " + "; ".join(reasons), cores, dict(free),
                      host, cache)
