"""A process's share of the host's cores, handed down by the pool through one variable.

Why one module: the judge worker, its candidate template and a suite's probing child each run
torch beside a dozen other such processes; on torch's default (a thread per core) their thread
pools spin against each other (measured on interpreter workers: small ops 300x slower). The pool
(runners/worker_process.py) sets the share; every process below it takes it from here. It sits in
bench/, the lowest layer the judge, its template and the suites' children may all import.
"""

from __future__ import annotations

import os

THREADS_ENV = "KMC_TORCH_THREADS"
"""The worker's share of the host's cores; unset or 0: torch's default."""


def thread_share() -> int:
    """The share set for this process, 0 where none is (a malformed value counts as none)."""
    try:
        return max(0, int(os.environ.get(THREADS_ENV, "0") or 0))
    except ValueError:
        return 0


def take_thread_share() -> None:
    """Size torch's thread pool to the share, where one is set (imports torch only then)."""
    threads = thread_share()
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
