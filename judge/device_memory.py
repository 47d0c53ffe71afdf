"""The judge worker's own GPU memory between jobs: cached blocks handed back to the driver.

Why: torch's caching allocator keeps the blocks a job freed, for the next allocation of this
process. A judge worker's jobs on the big cases (perf cases of 256-512 MiB inputs, their
references and comparisons) left 2.1-5.7 GiB of such blocks reserved beside the 0.9-4.0 GiB its
input cache holds, and peaked at 15.8-18.6 GiB reserved (an H100, 2026-12-05,
scripts/judge_memory_probe.py on swiglu, axpby, gather, embedding, transpose and three more).
Blocks a judge keeps idle are memory no candidate process can have: in the full suite with four
workers the GPU filled (79 GiB, 15-130 MiB free) and candidates were judged out of memory, also
when retried alone (runners/pool.py), since the other workers' cached blocks stay theirs while
the gate holds them off. So after each job a worker hands back what it holds beyond
`RELEASE_ABOVE_BYTES` of idle blocks; the next job's first allocations then come from the driver
again, at most once per job.
"""

from __future__ import annotations

import torch

RELEASE_ABOVE_BYTES = 1 << 30
"""Idle cached bytes a judge worker may keep between jobs before it hands them back."""


def release_cached_blocks(device: str) -> int:
    """Hand this process's idle cached blocks on `device` back to the driver when they exceed
    `RELEASE_ABOVE_BYTES`; the bytes that were idle (0 where nothing was released, and on the CPU)."""
    if device == "cpu" or not torch.cuda.is_available():
        return 0
    idle = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    if idle <= RELEASE_ABOVE_BYTES:
        return 0
    with torch.cuda.device(device):
        torch.cuda.empty_cache()
    return int(idle)
