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
again, at most once per job. A worker about to wait behind a job retried alone hands back
whatever it holds idle (judge/gate.py `on_waiting_behind_alone`): that job needs the memory now.

Each job's step line (judge/phases.py `record_steps`) also carries the worker's peak allocated
and reserved bytes during that job (`job_memory`), so a run shows which jobs fill the GPU, and
scripts/judge_memory_probe.py --history says which of the judge's lines allocated the peak.
"""

from __future__ import annotations

import torch

RELEASE_ABOVE_BYTES = 1 << 30
"""Idle cached bytes a judge worker may keep between jobs before it hands them back."""


PEAK_STEPS = ("memory:peak_allocated_gib", "memory:peak_reserved_gib")
"""Step names of a job's peaks, in GiB (summarised by their largest too: results/phases.py)."""


def _on_gpu(device: str) -> bool:
    return device != "cpu" and torch.cuda.is_available()


def start_job(device: str) -> None:
    """The allocator's peaks reset, so that `job_memory` reads this job's (a counter reset, no
    device work)."""
    if _on_gpu(device):
        torch.cuda.reset_peak_memory_stats(device)


def job_memory(device: str) -> dict[str, float]:
    """The job's step lines about memory, read at its end: its peaks since `start_job`, then
    what `release_cached_blocks` handed back (nothing on the CPU but the release's 0)."""
    steps: dict[str, float] = {}
    if _on_gpu(device):
        steps = dict(zip(PEAK_STEPS, (torch.cuda.max_memory_allocated(device) / 2**30,
                                      torch.cuda.max_memory_reserved(device) / 2**30), strict=True))
    steps["memory:released_gib"] = release_cached_blocks(device) / 2**30
    return steps


def release_cached_blocks(device: str, above: int = RELEASE_ABOVE_BYTES) -> int:
    """Hand this process's idle cached blocks on `device` back to the driver when they exceed
    `above` bytes; the bytes that were idle (0 where nothing was released, and on the CPU).
    `above=0` (before waiting behind a job retried alone, judge/gate.py): whatever is idle."""
    if not _on_gpu(device):
        return 0
    idle = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    if idle <= above:
        return 0
    with torch.cuda.device(device):
        torch.cuda.empty_cache()
    return int(idle)
