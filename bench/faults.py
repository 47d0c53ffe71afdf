"""Errors after which a GPU context is lost: every later operation in that process fails too.
Named once for the judge (judge/candidate/loading.py: the worker restarts) and the adapters that run a
suite's reference while probing it (bench/adapters/geak_record.py: the probe says so instead
of counting the shape as one the reference rejects)."""

from __future__ import annotations

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
