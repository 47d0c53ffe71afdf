"""Errors after which a GPU context is lost: every later operation in that process fails too.
Named once for the judge (judge/candidate/loading.py: the worker restarts) and the adapters that run a
suite's reference while probing it (bench/adapters/geak_record.py: the probe says so instead
of counting the shape as one the reference rejects). Also the GPU's out-of-memory errors, which
beside other processes may be theirs: the pool judges such a job again alone (runners/pool.py),
a probe tries its shape again (geak_record.py)."""

from __future__ import annotations

import re

DEVICE_ERROR_MARKERS = (
    "illegal memory access",
    "an illegal instruction",
    "misaligned address",
    "device-side assert",
    "unspecified launch failure",
    "CUDA error",
    "HIP error",
    "hipError",
    "cudaError",
)


def mentions_device_error(text: str) -> bool:
    return any(marker in text for marker in DEVICE_ERROR_MARKERS)


OUT_OF_MEMORY = re.compile(r"out of memory|OutOfMemoryError|hipErrorOutOfMemory|CUDA_ERROR_OUT_OF_MEMORY", re.I)


def mentions_out_of_memory(text: str) -> bool:
    return bool(OUT_OF_MEMORY.search(text))
